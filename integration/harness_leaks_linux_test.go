//go:build integration && linux

package integration

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// kernelIDRe matches kernel ids ("k" + 16 hex) in logs and paths.
var kernelIDRe = regexp.MustCompile(`\bk[0-9a-f]{16}\b`) //nolint:gochecknoglobals // immutable

// Leaks is what a check found of a daemon's kernels. Every entry names the
// thing precisely (pid with uid and command line, absolute path, fd target).
type Leaks struct {
	Procs   []string
	pids    []int // the processes we may kill: matched by state dir or kernel id
	Cgroups []string
	Staging []string
	Sockets []string
	Mounts  []string // staging tmpfs left mounted below the state dir
	FDs     []string
}

// Empty reports whether nothing was left.
func (l Leaks) Empty() bool {
	return len(l.Procs)+len(l.Cgroups)+len(l.Staging)+len(l.Sockets)+len(l.Mounts)+len(l.FDs) == 0
}

func (l Leaks) String() string {
	var b strings.Builder
	section := func(name string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s (%d):\n", name, len(items))
		for _, it := range items {
			fmt.Fprintf(&b, "    %s\n", it)
		}
	}
	section("processes", l.Procs)
	section("cgroup dirs", l.Cgroups)
	section("staging dirs", l.Staging)
	section("sockets", l.Sockets)
	section("mounts", l.Mounts)
	section("daemon fds beyond its start-up baseline", l.FDs)
	return b.String()
}

// knownIDs is every kernel id this daemon was seen to use: results, ps,
// its log, and the staging dirs.
func (d *Daemon) knownIDs() map[string]bool {
	d.noteIDsFromLog()
	if ents, err := os.ReadDir(filepath.Join(d.State, "kernels")); err == nil {
		d.mu.Lock()
		for _, e := range ents {
			if kernelIDRe.MatchString(e.Name()) {
				d.ids[e.Name()] = true
			}
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.ids))
	for id := range d.ids {
		out[id] = true
	}
	return out
}

func (d *Daemon) noteIDsFromLog() {
	b, _ := os.ReadFile(d.Log)
	d.mu.Lock()
	for _, id := range kernelIDRe.FindAllString(string(b), -1) {
		d.ids[id] = true
	}
	d.mu.Unlock()
}

// scan looks for everything of this daemon's kernels that still exists.
// With daemonAlive it also compares the daemon's fds with its baseline.
func (d *Daemon) scan(daemonAlive bool) Leaks {
	var l Leaks
	ids := d.knownIDs()
	d.scanProcs(ids, &l)
	l.Cgroups = findCgroups(ids)
	// A killed daemon's staging mounts (and so their mount points) stay
	// until the next daemon starts on the state dir and unmounts them:
	// leaks only while a daemon runs.
	var mounted []string
	if !daemonAlive {
		mounted = mountsBelow(d.State)
	}
	if ents, err := os.ReadDir(filepath.Join(d.State, "kernels")); err == nil {
		for _, e := range ents {
			p := filepath.Join(d.State, "kernels", e.Name())
			if !slices.ContainsFunc(mounted, func(m string) bool { return m == p || strings.HasPrefix(m, p+"/") }) {
				l.Staging = append(l.Staging, p)
			}
		}
	}
	_ = filepath.WalkDir(d.State, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type()&fs.ModeSocket != 0 {
			l.Sockets = append(l.Sockets, p)
		}
		return nil
	})
	if daemonAlive {
		// A killed daemon's staging mounts stay until the next one starts
		// on the state dir (isolate unmounts them then): leaks only while
		// a daemon runs.
		l.Mounts = mountsBelow(d.State)
	}
	if pid := d.Pid(); daemonAlive && pid != 0 {
		l.FDs = extraFDs(d.baseFDs, listFDs(pid))
	}
	return l
}

// mountsBelow lists the mount points below dir in this (the daemon's)
// mount namespace.
func mountsBelow(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// scanProcs finds processes that belong to this daemon's kernels: their
// command line or environment names the state dir (runner.py, TMPDIR), their
// cgroup is a kernel's, or (in the VM only, where nothing else runs) they
// run as a kernel uid or are unreaped children of the daemon. Without a
// cgroup (process-group mode) a process that cleared its environment is
// still found: it is in a kernel's process group or session, or it
// descends from a process found above.
func (d *Daemon) scanProcs(ids map[string]bool, l *Leaks) {
	self, daemon := os.Getpid(), d.Pid()
	d.mu.Lock()
	uids := make(map[int]bool, len(d.uids))
	for u := range d.uids {
		uids[u] = true
	}
	d.mu.Unlock()
	inVM := os.Getenv("KERNPOOL_IN_VM") == "1"
	procs := map[int]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == daemon {
			continue
		}
		if p := readProc(pid); p.ok {
			procs[pid] = p
		}
	}
	direct := map[int]string{}
	for pid, p := range procs {
		switch {
		case strings.Contains(p.cmdline, d.State) || strings.Contains(p.environ, d.State):
			direct[pid] = "names the state dir"
		case p.cgroupHas(ids) != "":
			direct[pid] = "in kernel cgroup " + p.cgroupHas(ids)
		case inVM && uids[p.uid]:
			direct[pid] = "runs as a kernel uid"
		case inVM && daemon != 0 && p.ppid == daemon:
			direct[pid] = "child of the daemon"
		}
	}
	kpids := d.kernelPids()
	pids := make([]int, 0, len(procs))
	for pid := range procs {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		p, why := procs[pid], direct[pid]
		if why == "" {
			why = groupWhy(pid, procs, direct, kpids)
		}
		if why == "" {
			continue
		}
		l.Procs = append(l.Procs, fmt.Sprintf("pid %d (ppid %d, pgid %d, sid %d, uid %d, state %s, %s): %q", pid, p.ppid, p.pgid, p.sid, p.uid, p.state, why, p.cmdline))
		if !strings.HasPrefix(why, "runs as") {
			l.pids = append(l.pids, pid)
		}
	}
}

// groupWhy says why pid, found by none of the direct rules, still belongs
// to a kernel: it is in the process group or session of a kernel pid (whose
// leader is gone or is itself a kernel process: a live foreign process
// with that pid means the pid was reused), or a process found directly is
// its ancestor.
func groupWhy(pid int, procs map[int]procInfo, direct map[int]string, kpids map[int]bool) string {
	p := procs[pid]
	for _, lead := range []struct {
		what string
		id   int
	}{{"process group", p.pgid}, {"session", p.sid}} {
		if lead.id == pid || !kpids[lead.id] {
			continue
		}
		if _, alive := procs[lead.id]; alive && direct[lead.id] == "" {
			continue // the kernel's pid now names someone else's process
		}
		return fmt.Sprintf("in the %s of kernel pid %d", lead.what, lead.id)
	}
	for q, n := p.ppid, 0; q > 1 && n < 64; q, n = procs[q].ppid, n+1 {
		if direct[q] != "" {
			return fmt.Sprintf("descends from leaked pid %d", q)
		}
	}
	return ""
}

// kernelStartedRe matches the pool's "kernel started" log line.
var kernelStartedRe = regexp.MustCompile(`kernel started: id=k[0-9a-f]{16} .*?\bpid=(\d+)`) //nolint:gochecknoglobals // immutable

// kernelPids are the pids of every kernel the daemon logged starting (in
// process-group mode each is its process group's and its session's id).
func (d *Daemon) kernelPids() map[int]bool {
	b, _ := os.ReadFile(d.Log)
	out := map[int]bool{}
	for _, m := range kernelStartedRe.FindAllStringSubmatch(string(b), -1) {
		if pid, err := strconv.Atoi(m[1]); err == nil && pid > 1 {
			out[pid] = true
		}
	}
	return out
}

type procInfo struct {
	ok                      bool
	ppid, pgid, sid, uid    int
	state, cmdline, environ string
	cgroup                  string
}

func readProc(pid int) procInfo {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procInfo{}
	}
	var p procInfo
	p.ok = true
	// comm may hold spaces: fields start after the last ')'.
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 3 {
			p.state = f[0]
			p.ppid, _ = strconv.Atoi(f[1])
			p.pgid, _ = strconv.Atoi(f[2])
			p.sid, _ = strconv.Atoi(f[3])
		}
	}
	if st, err := os.ReadFile(dir + "/status"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					p.uid, _ = strconv.Atoi(f[0])
				}
			}
		}
	}
	cl, _ := os.ReadFile(dir + "/cmdline")
	p.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
	env, _ := os.ReadFile(dir + "/environ")
	p.environ = string(env)
	cg, _ := os.ReadFile(dir + "/cgroup")
	p.cgroup = string(cg)
	return p
}

// cgroupHas returns the first kernel id in the process's cgroup paths.
func (p procInfo) cgroupHas(ids map[string]bool) string {
	for _, id := range kernelIDRe.FindAllString(p.cgroup, -1) {
		if ids[id] {
			return id
		}
	}
	return ""
}

// findCgroups lists cgroup dirs, in any hierarchy, named after a kernel id.
// Read-only: it never writes to a cgroup it finds.
func findCgroups(ids map[string]bool) []string {
	var out []string
	if len(ids) == 0 {
		return nil
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		if ids[e.Name()] {
			out = append(out, p)
			return fs.SkipDir
		}
		return nil
	})
	return out
}

func listFDs(pid int) []string {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil {
			out = append(out, e.Name()+" -> "+target)
		}
	}
	return out
}

// extraFDs returns the fds of now whose targets exceed the baseline's
// (compared as a multiset of targets: fd numbers get reused).
func extraFDs(base, now []string) []string {
	count := map[string]int{}
	for _, f := range base {
		count[fdTarget(f)]++
	}
	var extra []string
	for _, f := range now {
		if count[fdTarget(f)] > 0 {
			count[fdTarget(f)]--
			continue
		}
		extra = append(extra, f)
	}
	sort.Strings(extra)
	return extra
}

// fdTarget drops the fd number and the inode of sockets/pipes (a socket
// recreated at the same place is the same resource).
func fdTarget(f string) string {
	_, t, _ := strings.Cut(f, " -> ")
	if i := strings.IndexByte(t, '['); i > 0 && (strings.HasPrefix(t, "socket:") || strings.HasPrefix(t, "pipe:")) {
		return t[:i]
	}
	return t
}

// waitLeaks polls until nothing is left (teardown may finish just after
// the reply) and returns the last scan.
func (d *Daemon) waitLeaks(daemonAlive bool) Leaks {
	deadline := time.Now().Add(scaled(testenv.Patience))
	for {
		l := d.scan(daemonAlive)
		if l.Empty() || time.Now().After(deadline) {
			return l
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AssertClean fails the test with a list of what is left of the daemon's
// kernels while the daemon runs (call it after the kernels should be gone),
// then kills and removes those leftovers so later tests start clean.
func (d *Daemon) AssertClean(t *testing.T) {
	t.Helper()
	if l := d.waitLeaks(true); !l.Empty() {
		t.Errorf("left behind while the daemon runs:\n%s", l)
		d.killLeaks(l)
	}
}

// killLeaks SIGKILLs the leftover processes matched by state dir or kernel
// id (ours beyond doubt) and removes leftover kernel cgroup dirs.
func (d *Daemon) killLeaks(l Leaks) {
	for _, pid := range l.pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, m := range l.Mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	for _, cg := range l.Cgroups {
		_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0o644) // v2 only; absent on v1
		removeCgroupTree(cg)
	}
}

// removeCgroupTree rmdirs a kernel's cgroup dir bottom-up, retrying while it
// empties; only ever called on dirs named after one of our kernel ids.
func removeCgroupTree(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50; try++ {
			if err := os.Remove(dirs[i]); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
