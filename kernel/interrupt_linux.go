package kernel

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// endOthers SIGKILLs every live process of the kernel, the sandbox's list
// (its cgroup) plus the runner's process group, but the runner (pid) and
// the processes the runner named as its own (helpers, as pids of its pid
// namespace, matched against each process's NSpid). Without helper names
// (none arrived yet) nothing is killed: the grace kill covers it. It
// returns how many processes it signalled.
func endOthers(pid int, procs, helpers []int) int {
	if len(helpers) == 0 {
		return 0
	}
	seen := map[int]bool{pid: true}
	for _, p := range append(procs, liveGroupMembers(pid)...) {
		seen[p] = seen[p] || false
	}
	n := 0
	buf := make([]byte, 4096)
	for p, skip := range seen {
		if skip {
			continue
		}
		var nspid int
		var live bool
		nspid, live, buf = procIdentity(p, buf)
		if !live || contains(helpers, nspid) {
			continue
		}
		if unix.Kill(p, unix.SIGKILL) == nil {
			n++
		}
	}
	return n
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// procIdentity reads /proc/<pid>/status: the pid in the process's own pid
// namespace (the last NSpid field) and whether it still runs (not a zombie).
// It reads the whole file into buf, grown as needed up to procStatusMax
// (the Groups line, before NSpid, can list 65536 gids): a cut read would
// lose NSpid and make a helper look like a stranger. It returns buf for
// the next call.
func procIdentity(pid int, buf []byte) (nspid int, live bool, _ []byte) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false, buf
	}
	n := 0
	for {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
		if n == len(buf) {
			if len(buf) >= procStatusMax {
				break
			}
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
	_ = f.Close()
	nspid, live = pid, true
	for _, line := range bytes.Split(buf[:n], []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("State:")):
			st := bytes.TrimSpace(line[len("State:"):])
			live = len(st) > 0 && st[0] != 'Z' && st[0] != 'X'
		case bytes.HasPrefix(line, []byte("NSpid:")):
			f := bytes.Fields(line[len("NSpid:"):])
			if len(f) > 0 {
				if v, err := strconv.Atoi(string(f[len(f)-1])); err == nil {
					nspid = v
				}
			}
		}
	}
	return nspid, live, buf
}

// procStatusMax bounds procIdentity's read: 65536 ten-digit gids and the
// rest of the file fit.
const procStatusMax = 1 << 20
