//go:build unix

package kernel

import "golang.org/x/sys/unix"

// signalInterrupt delivers SIGINT to the runner (or to the init step in
// front of it, which forwards it).
func signalInterrupt(pid int) error { return unix.Kill(pid, unix.SIGINT) }
