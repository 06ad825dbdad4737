package kernel

import (
	"bufio"
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
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

// A helper the runner names by its pid in the kernel's own pid namespace
// (an isolated kernel has one) is kept: endOthers matches the last NSpid
// field of /proc/<pid>/status, not the daemon's pid. The helper here is
// the first process of a fresh pid namespace, so its name is 1.
func TestEndOthersKeepsAHelperNamedInItsPidNamespace(t *testing.T) {
	requireProc(t)
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	runner := startSleeper(t, 0)
	// exit 3 on SIGTERM: a namespace's first process ignores signals it
	// has no handler for, SIGKILL aside.
	helper := exec.Command(testenv.Python, "-c", "import signal, sys, time\n"+
		"signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\nprint('ready', flush=True)\ntime.sleep(1000)")
	helper.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Setpgid: true}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		_ = helper.Wait() // an error once the test reaped it
	})
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("helper did not start: %q", sc.Text())
	}
	if n := endOthers(runner.Process.Pid, []int{helper.Process.Pid}, []int{1}); n != 0 {
		t.Errorf("endOthers signalled %d processes, want 0", n)
	}
	_ = helper.Process.Signal(syscall.SIGTERM)
	err = helper.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("helper ended with %v, want its exit 3 on SIGTERM (it was killed before)", err)
	}
}

// procIdentity reads all of /proc/<pid>/status: a process with many
// supplementary groups (their list comes before NSpid) still shows the pid
// of its own namespace, up to the 65536 gids setgroups takes, whatever
// buffer the caller starts with. (A read cut at 4096 bytes missed it, and
// endOthers would have killed a helper as a stranger.)
func TestProcIdentityReadsPastLongGroups(t *testing.T) {
	requireProc(t)
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name string
		gids []uint32
	}{
		{"no groups", nil},
		{"groups past one page", gidsOfBytes(9000)},
		{"NGROUPS_MAX groups", gidsOfBytes(7 * 65536)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sleep", "1000")
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID,
				Credential: &syscall.Credential{Groups: c.gids}}
			if err := cmd.Start(); err != nil {
				t.Skipf("no pid namespace with %d groups here: %v", len(c.gids), err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			nspid, live, buf := procIdentity(cmd.Process.Pid, make([]byte, 4096))
			if nspid != 1 || !live {
				t.Errorf("procIdentity = %d, %v; want 1 (its own pid namespace's init), true", nspid, live)
			}
			if len(c.gids) > 0 && len(buf) < 7*len(c.gids) {
				t.Errorf("buffer of %d bytes after a status with %d gids", len(buf), len(c.gids))
			}
		})
	}
}

// gidsOfBytes returns distinct gids whose Groups line items ("<gid> ")
// take n bytes (n >= 7): six-digit gids of 7 bytes, n%7 of them seven-digit.
func gidsOfBytes(n int) []uint32 {
	gids := make([]uint32, 0, n/7)
	for i := 0; i < n/7; i++ {
		g := uint32(100000 + i)
		if i < n%7 {
			g = uint32(1000000 + i)
		}
		gids = append(gids, g)
	}
	return gids
}
