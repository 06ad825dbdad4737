package isolate

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// The helper-process trick: the test binary re-executed with this variable
// set plays a daemon that starts one kernel, reports it, and waits to be
// SIGKILLed.
const daemonEnv = "KERNPOOL_ISOLATE_TEST_DAEMON"

type daemonState struct {
	StateDir, Parent, ID, Staging, KillFile string
	Pids                                    []int
}

func TestMain_daemon(t *testing.T) {
	raw := os.Getenv(daemonEnv)
	if raw == "" {
		t.Skip("helper process only")
	}
	var st daemonState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(st.StateDir)
	cfg.CgroupParent = st.Parent
	iso, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := iso.reserve(kernelID(t), "alice", "default", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Start(context.Background(), kernel.Spec{ID: sb.ID(), Interpreter: testenv.Python, StateDir: st.StateDir, Env: []string{"PATH=/usr/bin:/bin"}, Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Exec(context.Background(), kernel.Cell{Code: escapeCell}); err != nil {
		t.Fatal(err)
	}
	st.ID, st.Staging = sb.ID(), k.StagingDir()
	st.Pids, _ = sb.group.Procs()
	st.KillFile = sb.group.KillFile()
	out, _ := json.Marshal(st)
	os.Stdout.Write(append(out, '\n'))
	select {} // until SIGKILLed
}

// TestDaemonSIGKILLThenRestartLeavesNothing: a daemon SIGKILLed with a
// kernel that left setsid and double-forked descendants; the kernel and
// every descendant die with it, and the next instance sweeps the group and
// the staging dir (and any process that would remain).
func TestDaemonSIGKILLThenRestartLeavesNothing(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	st := daemonState{StateDir: stateDir(t), Parent: testParent(t)}
	raw, _ := json.Marshal(st)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMain_daemon$", "-test.v=false")
	cmd.Env = append(os.Environ(), daemonEnv+"="+string(raw))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatalf("helper daemon: %v", err)
	}
	if err := json.Unmarshal(line, &st); err != nil {
		t.Fatalf("helper daemon said %q: %v", line, err)
	}
	if len(st.Pids) < 3 {
		t.Fatalf("helper kernel group has %v", st.Pids)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// The kernel itself dies with its host (Pdeathsig, stdin EOF).
	assertPidGone(t, st.Pids[0])
	// Its escaped descendants die too, before any restart: the runner's
	// watchdog (a pidfd on the runner) kills the kernel's cgroup once the
	// runner is gone. Bounded poll: they die asynchronously.
	survivors := st.Pids[1:]
	for end := time.Now().Add(testenv.Patience); len(survivors) > 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		survivors = slices.DeleteFunc(survivors, func(pid int) bool { return !alive(pid) })
	}
	if len(survivors) > 0 {
		t.Errorf("descendants %v of %v still alive 10s after the host died (kill file %q)", survivors, st.Pids, st.KillFile)
	}

	iso := newIso(t, func(c *Config) { c.StateDir, c.CgroupParent = st.StateDir, st.Parent })
	if r := iso.Report(); r.Swept != 1 {
		t.Errorf("swept %d groups, want 1", r.Swept)
	}
	assertGone(t, iso, st.ID, st.Pids)
	if _, err := os.Stat(st.Staging); !os.IsNotExist(err) {
		t.Errorf("staging dir %s remains: %v", st.Staging, err)
	}
	if _, err := os.Stat(filepath.Join(st.StateDir, "kernels", st.ID)); !os.IsNotExist(err) {
		t.Errorf("staging dir remains: %v", err)
	}
}

func assertPidGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 300 && alive(pid); i++ {
		syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
	}
	if alive(pid) {
		t.Errorf("kernel pid %d outlived its SIGKILLed host", pid)
	}
}
