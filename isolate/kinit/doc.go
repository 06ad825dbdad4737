// Package kinit is the kernel init step: the small program that runs
// between the daemon and the interpreter and confines a kernel before any
// user code runs (docs/design.md, "The sandbox").
//
// Go cannot mount, set a seccomp filter or fork into a fresh pid namespace
// between fork and exec, so the daemon (package isolate) re-executes its
// own binary (/proc/self/exe) with argv[0] = Arg0, already in new mount,
// pid, ipc, uts and (by default) network namespaces and already in the
// kernel's cgroup. That process calls Main at the top of main, sees Arg0
// and the EnvConfig variable, and becomes the kernel's init: it places
// itself in its v1 cgroups, enters a cgroup namespace and mounts the
// cgroup filesystems again, hides other kernels' staging mounts, binds the
// kernel-writable host dirs read-only, mounts private tmpfs on /tmp,
// /var/tmp, /dev/shm and the daemon's other scratch dirs (binding the
// staging dir back when it lies beneath one), its own devpts and mqueue,
// a fresh /proc, brings loopback up, sets umask 077, rlimits and
// no_new_privs, loads the seccomp filter, forks the interpreter as the
// kernel uid, reports on the status pipe (fd 3), forwards signals, reaps
// orphans and exits with the interpreter's status. For that last part,
// on x86-64, it execs into the reaper (reaper_amd64.asm: a few hundred
// bytes of machine code in a sealed memfd) so that no Go runtime stays
// resident in every idle kernel; where that cannot run it supervises in
// Go, and its ready line says which (init=reaper or init=go).
//
// Every binary that starts kernels through package isolate must call Main
// first thing in main (and in TestMain for tests that start kernels): on
// other processes it returns at once. It is a no-op off Linux.
package kinit
