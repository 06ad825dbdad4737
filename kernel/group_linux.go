package kernel

import (
	"bytes"
	"os"
	"strconv"
)

// groupRuns says whether process group pgid, which kill found members of,
// has one that is not a zombie: an init that reaps lazily (some container
// inits) keeps zombies around for seconds, and /proc tells them apart.
func groupRuns(pgid int) bool {
	pids, ok := scanGroup(pgid)
	return !ok || len(pids) > 0 // no /proc: trust kill
}

// liveGroupMembers lists the pids of process group pgid's live members.
func liveGroupMembers(pgid int) []int {
	pids, _ := scanGroup(pgid)
	return pids
}

// scanGroup lists from /proc the pids of process group pgid's members
// that are not zombies; ok is false when /proc cannot be read.
func scanGroup(pgid int) (pids []int, ok bool) {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil, false
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, false
	}
	want := []byte(strconv.Itoa(pgid))
	buf := make([]byte, 512)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if statLiveInGroup(name, want, buf) {
			if p, err := strconv.Atoi(name); err == nil {
				pids = append(pids, p)
			}
		}
	}
	return pids, true
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
