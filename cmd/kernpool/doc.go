// Command kernpool is the kernpool daemon and its CLI.
//
// It owns the command line (serve, exec, ps, shutdown, kill, doctor), the
// HCL configuration file (config*.go, documented in docs/config.md), the
// daemon's lifecycle (socket, signals, drain) and, in wire.go only, the
// wiring of the concrete isolation, environment and tool-RPC seams into
// pool.Config.
//
// Exit codes of every subcommand: 0 success, 1 the cell raised, 2 usage or
// connection error, 3 the cell timed out or its kernel was killed.
package main
