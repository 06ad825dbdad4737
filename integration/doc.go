// Package integration is kernpool's end-to-end suite: Go tests behind the
// "integration" build tag that run as root against the real kernpool binary
// (daemon, CLI and HTTP API over its Unix socket) on whatever cgroup layout
// the host has, and inside the unified cgroup-v2 VM of integration/vm/run.
//
// The harness (harness_*_test.go) builds ./cmd/kernpool once (or uses
// $KERNPOOL_BIN), starts one daemon per test on a private state dir and
// socket, and after every test runs a leak checker that lists whatever of the
// daemon's kernels is left: processes (pid, uid, command line), cgroup dirs,
// staging dirs, sockets and the daemon's extra open fds. A red run names
// what it left behind.
//
// Run on the host: go test -tags integration ./integration/... (as root;
// skips with a reason otherwise). Knobs: KERNPOOL_BIN, KERNPOOL_CHURN,
// KERNPOOL_LOAD_OWNERS, KERNPOOL_LOAD_CELLS, KERNPOOL_LOAD_PERSIST_OWNERS,
// KERNPOOL_LOAD_PERSIST_CELLS (default: the load knobs), KERNPOOL_DEATH_DEADLINE.
package integration
