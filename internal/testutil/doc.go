// Package testutil holds the helpers shared by the tests of several
// packages. It is test-only code: nothing outside _test.go files and the
// test tools under internal/ (the nemesis) imports it.
//
// Tests wait on conditions, never sleep for state: Eventually polls a
// condition until it holds or a deadline passes, and on failure reports
// what was awaited together with the condition's last error, which is
// usually all a reader needs to see why. ClusterAddr hands out loopback
// ports for clusters whose nodes restart on the same address.
package testutil
