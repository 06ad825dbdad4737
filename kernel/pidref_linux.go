package kernel

import "syscall"

// Unreaped reports whether the kernel's main process has not been reaped,
// so that its pid still names it (a /proc/<pid> path opened before the
// call was this process's). It signals 0 through the process's pidfd,
// which a reaped process's recycled pid cannot answer for.
func (k *Kernel) Unreaped() bool {
	return k.cmd.Process.Signal(syscall.Signal(0)) == nil
}
