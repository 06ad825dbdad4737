package isolate

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// logBuffer is a log sink safe for the isolator's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNewReportsKernelUIDs: doctor's profiles show uid -1 (one from the
// range per kernel) when kernels get uids of their own and the daemon's
// uid when they keep it; New skips a range uid a process runs as, and
// warns about it only then; it logs a reduced isolation when the report
// has one. The range is this test's own (62740-62749):
// other tests' kernels run in the default one.
func TestNewReportsKernelUIDs(t *testing.T) {
	testenv.RequireRoot(t)
	const first, last = 62740, 62749
	for _, c := range []struct {
		name        string
		runAs, busy bool
		wantUID     int
		wantTainted int
	}{
		{"uids of their own", true, false, -1, 0},
		{"its first and last in use", true, true, -1, 2},
		{"the daemon's uid", false, false, os.Geteuid(), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.busy {
				runAs(t, first)
				runAs(t, last)
			}
			var logs logBuffer
			iso := newIso(t, func(cfg *Config) {
				cfg.RunAsUser, cfg.UIDRange = c.runAs, [2]int{first, last}
				if !c.runAs {
					cfg.Isolation = kernel.IsolationProcess // kernels as root: accepted explicitly
				}
				cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
			})
			r := iso.Report()
			if got := r.Profiles[DefaultProfile].UID; got != c.wantUID {
				t.Errorf("default profile's uid %d, want %d", got, c.wantUID)
			}
			warned := strings.Contains(logs.String(), "kernel uids with running processes are not used")
			if r.TaintedUIDs != c.wantTainted || warned != (c.wantTainted > 0) {
				t.Errorf("%d uids skipped (want %d), warned %t\n%s", r.TaintedUIDs, c.wantTainted, warned, logs.String())
			}
			// Kernels as root are a reduction New must log; the others
			// depend on the host, but the log must match the report.
			reduced := strings.Contains(logs.String(), "reduced kernel isolation")
			if reduced != (r.Warning() != "") || !c.runAs && !reduced {
				t.Errorf("logged a reduced isolation: %t; the report's warning: %q\n%s", reduced, r.Warning(), logs.String())
			}
		})
	}
}

// runAs starts a process running as uid until the test ends.
func runAs(t *testing.T, uid int) {
	t.Helper()
	uidProc(t, uid)
}

// TestIsolatorUIDBusy: a retired uid comes back only when no process runs
// as it: the pool's busy check says so of a uid with a process, and not
// of one without.
func TestIsolatorUIDBusy(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange = [2]int{62750, 62759} })
	if iso.uids == nil {
		t.Fatal("a root daemon's isolator has no uid pool")
	}
	runAs(t, 62751)
	if !iso.uids.busy(62751) || iso.uids.busy(62752) {
		t.Fatalf("busy: uid with a process %t, uid without %t; want true, false", iso.uids.busy(62751), iso.uids.busy(62752))
	}
}

// TestScrubOfCleanUIDLogsNothing: the scrub before a lease warns only
// about entries it could not remove; scrubbing an empty dir cannot fail.
func TestScrubOfCleanUIDLogsNothing(t *testing.T) {
	testenv.RequireRoot(t)
	var logs logBuffer
	iso := newIso(t, func(cfg *Config) {
		cfg.UIDRange, cfg.ScrubDirs = [2]int{62760, 62769}, []string{testTempDir(t)}
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	})
	sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Release(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "scrub did not remove") {
		t.Fatalf("the scrub of an empty dir warned:\n%s", logs.String())
	}
}

// TestCleanStartLogsNoError: New on a fresh state dir and cgroup parent
// has nothing left to sweep or unmount, and says no error about either.
func TestCleanStartLogsNoError(t *testing.T) {
	testenv.RequireRoot(t)
	var logs logBuffer
	newIso(t, func(cfg *Config) {
		cfg.UIDRange = [2]int{62780, 62789}
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	})
	if strings.Contains(logs.String(), "[ERROR]") {
		t.Fatalf("New logged an error:\n%s", logs.String())
	}
}

// TestPrepareKeepsCallersProcAttr: Prepare adds the sandbox's settings to
// the attributes the caller already set, not in place of them.
func TestPrepareKeepsCallersProcAttr(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange = [2]int{62790, 62799} })
	sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sb.Release() })
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Noctty: true}
	mustOK(t, sb.Prepare(cmd, testTempDir(t)))
	if !cmd.SysProcAttr.Noctty || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatalf("after Prepare: Noctty %t (the caller's, want true), Pdeathsig %v (want SIGKILL)", cmd.SysProcAttr.Noctty, cmd.SysProcAttr.Pdeathsig)
	}
}

// TestPrepareAgainClosesCgroupFD: a second Prepare of a sandbox (a start
// retried) closes the cgroup fd the first one opened.
func TestPrepareAgainClosesCgroupFD(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange = [2]int{62800, 62809} })
	sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sb.Release() })
	staging := testTempDir(t)
	mustOK(t, sb.Prepare(exec.Command("/bin/true"), staging))
	first := sb.cgfd
	if first == nil {
		t.Skip("no cgroup fd on this host (cgroup v1 only)")
	}
	mustOK(t, sb.Prepare(exec.Command("/bin/true"), staging))
	if err := first.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the first Prepare's cgroup fd is still open (Close: %v)", err)
	}
}

// TestKillWithoutCgroupKillsTheUID: without a cgroup, Kill ends every
// process of a kernel's own uid, also one outside its process group.
func TestKillWithoutCgroupKillsTheUID(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(cfg *Config) {
		cfg.CgroupEnabled, cfg.Isolation, cfg.PerOwnerUID = false, kernel.IsolationProcess, false
		cfg.UIDRange = [2]int{62810, 62819}
	})
	sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sb.Release() })
	p, done := uidProc(t, sb.UID())
	mustOK(t, sb.Kill())
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the uid's process exited by itself, not killed")
		}
	case <-time.After(time.Minute): // only stops a hung test
		_ = p.Process.Kill()
		<-done
		t.Fatal("Kill left a process of the kernel's uid running")
	}
}
