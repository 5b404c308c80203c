// Command timemachine is the single binary of timemachine: the server, the
// job and admin CLIs, and the built-in load generator.
//
// It turns flags and TIMEMACHINE_* variables into configuration, runs a
// node until a signal or a fatal storage failure, and is the only place
// that exits the process: 0 after a clean stop, 70 when storage failed
// (storage.ErrFatal: the node stops without touching its storage again),
// 1 for anything else (docs/operations.md#failures).
package main
