// Package layout holds no code, only a test that keeps the package layout
// of docs/architecture.md#layout true: every package imports only packages
// below it in the layer list, model depends on the standard library alone,
// the HTTP layer reaches no raft, bbolt or Pebble, and nothing but tests
// imports internal/.
package layout
