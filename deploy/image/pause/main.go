//go:build unix

// Command pause is the sandbox ("pause") container of a pod on a node
// that cannot pull images: it holds the pod's namespaces and does
// nothing until it is told to stop. deploy/image/build makes it an
// image FROM scratch holding only this static binary.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of the pod it also reaps children a container of a
	// shared pid namespace leaves behind; SIGCHLD wakes it for that.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
