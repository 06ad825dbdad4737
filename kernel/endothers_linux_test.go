package kernel

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

// startSleeper starts a sleep in process group pgid (0: its own group)
// and registers a cleanup that kills and reaps it.
func startSleeper(t *testing.T, pgid int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // an error once the test reaped it
	})
	return cmd
}

// endedBy sends cmd SIGTERM, reaps it and returns the signal that ended
// it: SIGKILL when it was killed before (a SIGKILL already sent ends the
// process whatever comes after it), SIGTERM when it still ran; no waiting
// for a time either way.
func endedBy(t *testing.T, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("pid %d: %v", cmd.Process.Pid, err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		t.Fatalf("pid %d ended with %v, not by a signal", cmd.Process.Pid, err)
	}
	return ws.Signal()
}

// endOthers kills exactly the kernel's processes that are neither the
// runner nor a helper it named, from both the sandbox's list and the
// runner's group, and returns how many it signalled: here two.
func TestEndOthersCountsWhatItKills(t *testing.T) {
	requireProc(t)
	runner := startSleeper(t, 0)
	member := startSleeper(t, runner.Process.Pid) // found through the group only
	listed := startSleeper(t, 0)                  // found through procs only
	helper := startSleeper(t, 0)                  // listed, but a named helper
	procs := []int{listed.Process.Pid, helper.Process.Pid, runner.Process.Pid}

	if n := endOthers(runner.Process.Pid, procs, nil); n != 0 {
		t.Fatalf("without helper names endOthers signalled %d, want 0", n)
	}
	if n := endOthers(runner.Process.Pid, procs, []int{helper.Process.Pid}); n != 2 {
		t.Errorf("endOthers signalled %d processes, want 2", n)
	}
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		want syscall.Signal
	}{
		{"group member", member, syscall.SIGKILL},
		{"listed process", listed, syscall.SIGKILL},
		{"runner", runner, syscall.SIGTERM},
		{"helper", helper, syscall.SIGTERM},
	} {
		if got := endedBy(t, c.cmd); got != c.want {
			t.Errorf("%s %d ended by %v, want %v", c.name, c.cmd.Process.Pid, got, c.want)
		}
	}
}
