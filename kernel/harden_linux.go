package kernel

import "syscall"

// setDeathSignal sets Pdeathsig: it covers a cell that holds the GIL in C
// code, where the runner's stdin watcher cannot run.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
