package isolate

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// Release and Kill: a kernel's leftovers must not outlive it, and a uid
// that may still run one is retired, not leased again. Ranges 62820-62869.

// uidProc starts `sleep` as uid in a session of its own (outside any
// kernel's process group); the channel gets its Wait result, then closes.
func uidProc(t *testing.T, uid int) (*exec.Cmd, chan error) {
	t.Helper()
	p := exec.Command("sleep", "600")
	p.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	mustOK(t, p.Start())
	done := make(chan error, 1)
	go func() { done <- p.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = p.Process.Kill()
		select {
		case <-done:
		case <-time.After(time.Minute): // only stops a hung test
		}
	})
	return p, done
}

// freeze puts pid in a v1 freezer cgroup of the test's own and freezes
// it: a frozen process does not die of SIGKILL until thawed, as one in
// uninterruptible sleep. The cleanup thaws it (the kill then lands).
func freeze(t *testing.T, pid int, done <-chan error) {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup/freezer", testParent(t))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no v1 freezer to hold a process: %v", err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(time.Minute): // only stops a hung test
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test's freezer group: %v", err)
		}
	})
	mustOK(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(itoa(pid)), 0))
	mustOK(t, os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0))
	for {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		mustOK(t, err)
		if strings.TrimSpace(string(b)) == "FROZEN" {
			return
		}
		time.Sleep(time.Millisecond) // FREEZING: the kernel is stopping it
	}
}

// TestReleaseWithoutCgroup: without a cgroup, Release kills every process
// of the kernel's uid (also one outside its process group), returns no
// error when nothing is left, and frees the uid only when nothing of it
// runs: a process the kill cannot end (frozen) retires the uid.
func TestReleaseWithoutCgroup(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name        string
		first       int
		proc        bool // a process of the kernel's uid, outside its group
		frozen      bool // ... that SIGKILL cannot end
		wantTainted int
	}{
		{"nothing left", 62820, false, false, 0},
		{"a process outside its group", 62830, true, false, -1}, // killed, maybe not yet gone: not asserted
		{"a process the kill cannot end", 62840, true, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs logBuffer
			iso := newIso(t, func(cfg *Config) {
				cfg.CgroupEnabled, cfg.Isolation, cfg.PerOwnerUID = false, kernel.IsolationProcess, false
				cfg.UIDRange = [2]int{c.first, c.first + 9}
				cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
			})
			sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
			mustOK(t, err)
			if sb.UID() < c.first || sb.UID() > c.first+9 {
				t.Fatalf("the sandbox's uid %d is not from the range", sb.UID())
			}
			var done chan error
			pid := 0
			if c.proc {
				var p *exec.Cmd
				p, done = uidProc(t, sb.UID())
				pid = p.Process.Pid
				if c.frozen {
					freeze(t, pid, done)
				}
			}
			if _, err := sb.Release(); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if c.proc && !c.frozen {
				// SIGKILL marks its target before kill(2) returns: a
				// process Release did not kill is told at once.
				if !testenv.Doomed(pid) {
					t.Fatal("Release left a process of the kernel's uid running")
				}
				select {
				case err := <-done:
					if err == nil {
						t.Fatal("the uid's process exited by itself, not killed")
					}
				case <-time.After(time.Minute): // only stops a hung test
					t.Fatal("Release left a process of the kernel's uid running")
				}
			}
			if c.wantTainted < 0 {
				return
			}
			retired := strings.Contains(logs.String(), "its uid is retired")
			if n := iso.TaintedUIDs(); n != c.wantTainted || retired != (c.wantTainted > 0) {
				t.Fatalf("%d uids retired (want %d), logged: %t\n%s", n, c.wantTainted, retired, logs.String())
			}
		})
	}
}

// TestGroupKillFailureReported: with a cgroup, Kill returns no error when
// the group's kill worked and the error when it failed, and Release
// reports the failed kill of its group. The failure is real: /dev/full
// bound on the group's cgroup.kill makes every write to it fail (ENOSPC).
func TestGroupKillFailureReported(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange = [2]int{62850, 62859} })
	id := kernelID(t)
	sb, err := iso.reserve(id, "alice", DefaultProfile, Limits{})
	mustOK(t, err)
	t.Cleanup(func() { _, _ = sb.Release() }) // a test that failed early
	kf := sb.group.KillFile()
	if kf == "" {
		t.Skip("no cgroup.kill on this host")
	}
	if err := sb.Kill(); err != nil {
		t.Fatalf("Kill of a group whose kill works: %v", err)
	}
	mustOK(t, unix.Mount("/dev/full", kf, "", unix.MS_BIND, ""))
	t.Cleanup(func() {
		mustOK(t, unix.Unmount(kf, 0))
		mustOK(t, sb.group.Remove(releaseTimeout)) // Release could not: its kill fails too
	})
	if err := sb.Kill(); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Kill of a group whose kill fails: %v, want ENOSPC", err)
	}
	_, err = sb.Release()
	if err == nil || !strings.Contains(err.Error(), "kill group "+id) {
		t.Fatalf("Release: %v, want the failed kill of group %s", err, id)
	}
}

// TestPrepareGivesKillFile: the runner gets its group's cgroup.kill (the
// cgroup2 group dir's, where the host has one) and no variable without.
func TestPrepareGivesKillFile(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange = [2]int{62860, 62869} })
	id := kernelID(t)
	sb, err := iso.reserve(id, "alice", DefaultProfile, Limits{})
	mustOK(t, err)
	t.Cleanup(func() { _, _ = sb.Release() })
	var want []string
	for _, d := range groupDirs(iso, id) {
		if _, err := os.Stat(filepath.Join(d, "cgroup.kill")); err == nil {
			want = append(want, kernel.EnvCgroupKill+"="+filepath.Join(d, "cgroup.kill"))
		}
	}
	cmd := exec.Command("/bin/true")
	mustOK(t, sb.Prepare(cmd, testTempDir(t)))
	var got []string
	for _, e := range cmd.Env {
		if strings.HasPrefix(e, kernel.EnvCgroupKill+"=") {
			got = append(got, e)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the runner's kill file: %q, want %q", got, want)
	}
}

// TestReleaseClosesCgroupFD: Release closes the cgroup fd of a Prepare
// whose start never happened (no Started to close it).
func TestReleaseClosesCgroupFD(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange = [2]int{62870, 62879} })
	sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
	mustOK(t, err)
	t.Cleanup(func() { _, _ = sb.Release() }) // a test that failed early
	mustOK(t, sb.Prepare(exec.Command("/bin/true"), testTempDir(t)))
	fd := sb.cgfd
	if fd == nil {
		t.Skip("no cgroup fd on this host (cgroup v1 only)")
	}
	if _, err := sb.Release(); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Release left Prepare's cgroup fd open (Close: %v)", err)
	}
}
