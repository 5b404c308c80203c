// Package e2e holds the end-to-end tests of timemachine: the real binary run
// as child processes on loopback ports, a webhook receiver in the test
// process, kill -9 and restart. The package has no code of its own; the
// harness and the tests are in its _test.go files.
//
// The binary is $TIMEMACHINE_BIN when set (the Makefile sets it to the
// absolute path of bin/timemachine after building it); otherwise the tests
// build ./cmd/timemachine once per `go test` run into a temporary
// directory.
//
//	make test-e2e
//	go test -count=1 ./e2e/
//
// The web console's browser test (console_test.go) drives Debian's headless
// Chromium over the DevTools protocol; it runs with TIMEMACHINE_UI=1 (make
// test-ui, which also refreshes the screenshots in docs/img) or
// TIMEMACHINE_UI=auto (make test: only when chromium is installed).
package e2e
