//go:build !windows

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyHangup delivers SIGHUP (reload the configuration) to c.
func notifyHangup(c chan<- os.Signal) { signal.Notify(c, syscall.SIGHUP) }
