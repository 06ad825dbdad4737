// Command kernpool is the kernpool daemon and its CLI.
//
// It owns the command line (serve, exec, ps, shutdown, kill, interrupt,
// vars, spill, doctor, version): flags, output and exit codes, and for
// serve the process's ties to its invocation (signals, SIGHUP reload,
// systemd notification). The daemon itself (configuration, wiring of the
// sandbox, environment and tool-RPC seams, serving, draining) is package
// pool/daemon, which Go programs may embed.
//
// Exit codes of every subcommand: 0 success, 1 the cell raised, 2 usage or
// connection error, 3 the cell timed out or its kernel was killed, 4
// refused for capacity or a quota (retry later).
package main
