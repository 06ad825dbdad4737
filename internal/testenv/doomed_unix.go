//go:build unix

package testenv

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Doomed reports whether pid is gone, a zombie, exiting, or has SIGKILL
// pending. kill(2) of SIGKILL marks every process it reaches before it
// returns, so right after a kill a test can tell positively whether the
// kill reached a process: waiting for a missed process to die would only
// end at the test's patience. It reads Linux's /proc; callers skip
// without it.
func Doomed(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			panic("testenv.Doomed needs /proc")
		}
		return true // gone (reaped)
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	// After the command: state ppid pgrp session tty_nr tpgid flags ...
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" {
		return true // a zombie, or dead
	}
	const pfExiting = 0x4 // PF_EXITING: do_exit has begun
	if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	const sigkill = 1 << (9 - 1)
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}
