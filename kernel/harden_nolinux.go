//go:build unix && !linux

package kernel

import "syscall"

// setDeathSignal does nothing: there is no Pdeathsig here, and the
// runner's stdin watcher alone takes the kernel down when its host dies.
func setDeathSignal(*syscall.SysProcAttr) {}
