package daemon

import "golang.org/x/sys/unix"

// hardenDaemon makes the daemon non-dumpable: no core dumps, and its
// /proc/<pid> files (environ, mem, maps, fd) belong to root, so a kernel
// running as the daemon's own uid (--isolation=process) cannot read its
// environment or memory or ptrace it.
func hardenDaemon() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
