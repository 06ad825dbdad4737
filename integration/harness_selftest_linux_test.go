//go:build integration && linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExtraFDs: fd numbers are ignored, socket/pipe inodes are ignored,
// anything beyond the baseline's multiset is reported.
func TestExtraFDs(t *testing.T) {
	cases := []struct {
		name       string
		base, now  []string
		wantExtras []string
	}{
		{"same", []string{"3 -> /dev/null", "4 -> socket:[1]"}, []string{"5 -> socket:[9]", "3 -> /dev/null"}, nil},
		{"new file", []string{"3 -> /dev/null"}, []string{"3 -> /dev/null", "7 -> /tmp/x"}, []string{"7 -> /tmp/x"}},
		{"one more socket", []string{"4 -> socket:[1]"}, []string{"4 -> socket:[1]", "8 -> socket:[2]"}, []string{"8 -> socket:[2]"}},
		{"fewer", []string{"3 -> /a", "4 -> /b"}, []string{"3 -> /a"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := extraFDs(tc.base, tc.now); !reflect.DeepEqual(got, tc.wantExtras) {
				t.Fatalf("extraFDs = %v, want %v", got, tc.wantExtras)
			}
		})
	}
}

// TestLeakCheckerFindsPlantedProcess: a process whose environment names a
// daemon's state dir (as every kernel process does through TMPDIR) is
// reported with its pid and command line, and killLeaks ends it; a staging
// dir left behind is reported too. Proves the checker can fail.
func TestLeakCheckerFindsPlantedProcess(t *testing.T) {
	base := t.TempDir()
	d := &Daemon{t: t, Base: base, State: filepath.Join(base, "state"), Log: filepath.Join(base, "log"),
		ids: map[string]bool{}, uids: map[int]bool{}}
	staging := filepath.Join(d.State, "kernels", "k0123456789abcdef")
	if err := os.MkdirAll(filepath.Join(staging, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Env = []string{"TMPDIR=" + filepath.Join(staging, "tmp")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() { _ = cmd.Process.Kill(); <-done }()
	// Start returns once the child's close-on-exec pipe closes, which is
	// before the new image's argv and environment are laid out: until then
	// /proc/PID/environ reads empty (seen under TCG in the VM).
	waitFor(t, 2*time.Minute, "the planted process's environment", func() bool {
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		return strings.Contains(string(env), staging)
	})

	l := d.scan(false)
	if len(l.pids) != 1 || l.pids[0] != cmd.Process.Pid {
		t.Fatalf("planted pid %d not found: %s", cmd.Process.Pid, l)
	}
	if !strings.Contains(l.String(), "/bin/sleep 300") || !strings.Contains(l.String(), staging) {
		t.Fatalf("report lacks the command line or the staging dir:\n%s", l)
	}
	d.killLeaks(l)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("killLeaks did not end the planted process")
	}
}

// TestLeakCheckerFindsEnvClearedProcesses: in process-group mode (no
// cgroup) a leaked process that cleared its environment and whose command
// line names nothing of the daemon is still found: one left in the process
// group of a dead kernel (known from the daemon's "kernel started" log
// line), one that left the group with setsid below a kernel process that
// still runs. killLeaks ends both.
func TestLeakCheckerFindsEnvClearedProcesses(t *testing.T) {
	base := t.TempDir()
	d := &Daemon{t: t, Base: base, State: filepath.Join(base, "state"), Log: filepath.Join(base, "log"),
		ids: map[string]bool{}, uids: map[int]bool{}}
	tmp := filepath.Join(d.State, "kernels", "k0123456789abcdef", "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(base, "pids")
	// Kernel A leaves a child in its group, then exits: the child is
	// reparented and keeps nothing but its process group.
	a := exec.Command("/bin/sh", "-c", "env -i /bin/sleep 300 & echo $! >> "+pidFile)
	// Kernel B stays, with a setsid child (a new group and session).
	b := exec.Command("/bin/sh", "-c", "env -i /usr/bin/setsid /bin/sleep 301 & echo $! >> "+pidFile+"; exec /bin/sleep 302")
	for _, c := range []*exec.Cmd{a, b} {
		c.Env = []string{"TMPDIR=" + tmp}
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	bDone := make(chan struct{})
	go func() { _ = b.Wait(); close(bDone) }()
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("2026-12-01T00:00:00.000Z [INFO]  kernpool.pool: kernel started: id=k0123456789abcdef owner=o mode=default pid=%d uid=-1\n", a.Process.Pid)
	if err := os.WriteFile(d.Log, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	var planted []int
	waitFor(t, 10*time.Second, "both planted pids", func() bool {
		raw, _ := os.ReadFile(pidFile)
		planted = nil
		for _, f := range strings.Fields(string(raw)) {
			n, _ := strconv.Atoi(f)
			planted = append(planted, n)
		}
		return len(planted) == 2
	})
	t.Cleanup(func() {
		for _, pid := range append(planted, b.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-bDone
	})
	// Until each child has exec'd its env -i sleep it is a copy of the
	// shell (and found by its environment): wait for the env-cleared state.
	wants := []string{"in the process group of kernel pid " + strconv.Itoa(a.Process.Pid), "descends from leaked pid " + strconv.Itoa(b.Process.Pid)}
	var l Leaks
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l = d.scan(false)
		found := slices.Contains(l.pids, planted[0]) && slices.Contains(l.pids, planted[1])
		if found && strings.Contains(l.String(), wants[0]) && strings.Contains(l.String(), wants[1]) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("planted pids %v not found as %q:\n%s", planted, wants, l)
		}
	}
	d.killLeaks(l)
	for _, pid := range planted {
		waitFor(t, 10*time.Second, fmt.Sprintf("killLeaks to end pid %d", pid), func() bool { return !pidAlive(pid) })
	}
}
