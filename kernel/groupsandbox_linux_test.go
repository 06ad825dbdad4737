package kernel

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestGroupSandboxKillKillsWholeTree exercises ProcessGroup alone (no
// runner, whose watchdog would kill the group anyway): a shell with two
// background children, all in the sandbox's process group. Kill must take
// down every member, and Release must then find the group empty.
func TestGroupSandboxKillKillsWholeTree(t *testing.T) {
	requireProc(t)
	sb := NewProcessGroup()
	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & echo $!; sleep 1000 & echo $!; wait")
	out := startPrepared(t, sb, cmd)
	waited := false
	t.Cleanup(func() {
		// The group (its id is the shell's pid): members a broken Kill
		// missed must not outlive the test.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if !waited {
			_ = cmd.Wait()
		}
	})
	if err := sb.Started(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	pids := []int{cmd.Process.Pid}
	sc := bufio.NewScanner(out)
	for len(pids) < 3 && sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatalf("child pid line %q: %v", sc.Text(), err)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("tree member %d not running before Kill (pids %v)", pid, pids)
		}
	}
	if err := sb.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	waited = true
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) {
		t.Fatalf("shell exit after Kill = %v, want killed", err)
	}
	// SIGKILL marks its targets before kill(2) returns: a member the
	// Kill missed is told at once, not after a wait for its death.
	for _, pid := range pids {
		if !testenv.Doomed(pid) {
			t.Fatalf("tree member %d survives the sandbox's Kill (pids %v)", pid, pids)
		}
	}
	for _, pid := range pids {
		if !waitDead(pid, testenv.Patience) {
			t.Errorf("tree member %d survives the sandbox's Kill", pid)
		}
	}
	if _, err := sb.Release(); err != nil {
		t.Fatalf("Release after Kill: %v", err)
	}
}

// TestGroupSandboxReleaseWaitsForDyingMembers: Release right after Kill,
// while a member is still dying (freeing 128 MiB of touched memory takes
// the kernel a while after SIGKILL), waits for it and succeeds, and no
// member runs once it returned. A Release that gave up at its first look
// would report the group as surviving.
func TestGroupSandboxReleaseWaitsForDyingMembers(t *testing.T) {
	requireProc(t)
	sb := NewProcessGroup()
	cmd := exec.Command(testenv.Python, "-c", "import time\nb = bytearray(128 << 20)\nprint('ready', flush=True)\ntime.sleep(1000)")
	out := startPrepared(t, sb, cmd)
	defer func() { _ = cmd.Wait() }()
	if err := sb.Started(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		_ = cmd.Process.Kill()
		t.Fatalf("member did not start: %q", sc.Text())
	}
	if err := sb.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := sb.Release(); err != nil {
		t.Fatalf("Release right after Kill: %v", err)
	}
	if live := liveGroupMembers(cmd.Process.Pid); len(live) > 0 {
		t.Fatalf("members %v run after Release returned", live)
	}
}

// startPrepared starts cmd in sb and returns its stdout.
func startPrepared(t *testing.T, sb *ProcessGroup, cmd *exec.Cmd) io.ReadCloser {
	t.Helper()
	if err := sb.Prepare(cmd, ""); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return out
}
