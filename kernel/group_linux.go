package kernel

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// groupLive says whether process group pgid has a member that is not a
// zombie. kill(-pgid, 0) alone also counts zombies, which an init that
// reaps lazily (some container inits) keeps around for seconds; so when it
// finds members, /proc tells whether any of them still runs.
func groupLive(pgid int) (bool, error) {
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false, err
	}
	dir, err := os.Open("/proc")
	if err != nil {
		return true, nil // no /proc: trust kill
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return true, nil
	}
	want := []byte(strconv.Itoa(pgid))
	buf := make([]byte, 512)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if statLiveInGroup(name, want, buf) {
			return true, nil
		}
	}
	return false, nil
}

// statLiveInGroup reads /proc/<pid>/stat: "pid (comm) state ppid pgrp ...".
func statLiveInGroup(pid string, pgid, buf []byte) bool {
	f, err := os.Open("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	n, _ := f.Read(buf)
	_ = f.Close()
	stat := buf[:n]
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 3 {
		return false
	}
	state, pgrp := fields[0], fields[2]
	return bytes.Equal(pgrp, pgid) && !bytes.Equal(state, []byte("Z")) && !bytes.Equal(state, []byte("X"))
}
