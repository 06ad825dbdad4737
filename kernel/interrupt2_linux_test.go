package kernel

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
)

// execInterrupted runs code streamed, interrupts it once its first output
// arrived, and returns the reply, the error and the time from the
// interrupt to Exec's return, and the error.
func execInterrupted(t *testing.T, k *Kernel, code string, grace time.Duration) (*Reply, time.Duration, error) {
	t.Helper()
	log := newEventLog()
	type result struct {
		rep *Reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := k.Exec(context.Background(), Cell{Code: code, Grace: grace, Stream: log.add})
		done <- result{rep, err}
	}()
	<-log.first
	start := time.Now()
	if err := k.Interrupt(); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	r := <-done
	return r.rep, time.Since(start), r.err
}

// A cell that ignores SIGINT gets the documented default grace (2 s,
// docs/api.md) before the kill: a lower bound, which a loaded host only
// lengthens.
func TestInterruptDefaultGrace(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ignoring', flush=True)\ntime.sleep(60)"
	_, took, err := execInterrupted(t, k, code, 0)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if took < 2*time.Second {
		t.Fatalf("killed %v after the interrupt, before the 2 s default grace", took)
	}
}

// SIGINT repeats every 100 ms (docs/design.md) until the cell ends, not
// faster: a cell that ends at its fifth SIGINT ends at least 400 ms after
// the first (a lower bound, which a loaded host only lengthens).
func TestInterruptRepeatSpacing(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	code := "import signal, time\nhits = []\n" +
		"def on_int(s, f):\n    hits.append(s)\n    if len(hits) == 5:\n        raise KeyboardInterrupt\n" +
		"signal.signal(signal.SIGINT, on_int)\nprint('waiting', flush=True)\nwhile True:\n    time.sleep(0.01)"
	rep, took, err := execInterrupted(t, k, code, testenv.Patience)
	if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) || !strings.Contains(rep.Traceback, "KeyboardInterrupt") {
		t.Fatalf("reply %+v, err %v; want the cell ended by its fifth SIGINT", rep, err)
	}
	if took < 400*time.Millisecond {
		t.Fatalf("five SIGINTs within %v of the interrupt, want them 100 ms apart", took)
	}
}

// The debug log says how many of the cell's processes an interrupt ended,
// and says nothing when there were none.
func TestInterruptLogsEndedProcesses(t *testing.T) {
	requireProc(t)
	cases := []struct {
		name, code, want string
	}{
		{"a subprocess", "import subprocess\np = subprocess.Popen(['/bin/sleep', '60'])\nprint(p.pid, flush=True)\np.wait()", "count=1"},
		{"none", "import time\nprint('alone', flush=True)\ntime.sleep(60)", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			spec := baseSpec(t)
			spec.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})
			k := startKernel(t, spec, "")
			rep, _, err := execInterrupted(t, k, c.code, testenv.Patience)
			if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) {
				t.Fatalf("reply %+v, err %v", rep, err)
			}
			var lines []string
			sc := bufio.NewScanner(strings.NewReader(logs.String()))
			for sc.Scan() {
				if strings.Contains(sc.Text(), "interrupt ended the cell's processes") {
					lines = append(lines, sc.Text())
				}
			}
			if c.want == "" && len(lines) != 0 || c.want != "" && (len(lines) != 1 || !strings.Contains(lines[0], c.want)) {
				t.Fatalf("log lines %q, want %q", lines, c.want)
			}
		})
	}
}

// Release alone (no Kill first) ends the whole group: it kills the group
// on each look, not only its leader.
func TestGroupSandboxReleaseKillsTheGroup(t *testing.T) {
	requireProc(t)
	sb := NewProcessGroup()
	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & echo $!; wait")
	out := startPrepared(t, sb, cmd)
	defer func() { _ = cmd.Wait() }()
	if err := sb.Started(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		_ = cmd.Process.Kill()
		t.Fatal("no child pid")
	}
	child := atoi(t, sc.Text())
	if _, err := sb.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if alive(child) || len(liveGroupMembers(cmd.Process.Pid)) > 0 {
		t.Fatalf("child %d alive %v, members %v after Release", child, alive(child), liveGroupMembers(cmd.Process.Pid))
	}
}

// Release of a group whose leader already exited (and was reaped) still
// waits for the members, here one freeing 128 MiB after its SIGKILL: it
// probes the group, not the leader's pid.
func TestGroupSandboxReleaseWithoutItsLeader(t *testing.T) {
	requireProc(t)
	testenv.RequirePython(t)
	sb := NewProcessGroup()
	member := testenv.Python + ` -c "import time; b = bytearray(128 << 20); print('ready', flush=True); time.sleep(1000)" &`
	cmd := exec.Command("/bin/sh", "-c", member)
	out := startPrepared(t, sb, cmd)
	if err := sb.Started(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		_ = sb.Kill()
		t.Fatalf("member did not start: %q", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		_ = sb.Kill()
		t.Fatalf("leader: %v", err)
	}
	if len(liveGroupMembers(pgid)) != 1 {
		_ = sb.Kill()
		t.Fatalf("members %v, want the one left by the leader", liveGroupMembers(pgid))
	}
	if _, err := sb.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if live := liveGroupMembers(pgid); len(live) > 0 {
		t.Fatalf("members %v run after Release returned", live)
	}
}

// pidNSSandbox is the process-group sandbox with the runner in a pid
// namespace of its own, as package isolate's init step puts it: the
// runner's H marks then name its helpers by their pids in that namespace.
type pidNSSandbox struct{ *ProcessGroup }

func (s pidNSSandbox) Prepare(cmd *exec.Cmd, staging string) error {
	if err := s.ProcessGroup.Prepare(cmd, staging); err != nil {
		return err
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	return nil
}

// An interrupt spares the runner's own helpers when the runner lives in a
// pid namespace: they are told apart by their pid in that namespace
// (/proc/<pid>/status NSpid), not by the host's.
func TestInterruptSparesHelpersInAPidNamespace(t *testing.T) {
	requireProc(t)
	spec := baseSpec(t)
	spec.Sandbox = pidNSSandbox{NewProcessGroup()}
	k := startKernel(t, spec, "")
	if got := mustExec(t, k, "import os\nos.getpid()").Stdout; got != "1\n" {
		t.Fatalf("the runner's pid in its namespace is %q, want 1", got)
	}
	var helpers []int
	for _, p := range liveGroupMembers(k.Pid()) {
		if p != k.Pid() {
			helpers = append(helpers, p)
		}
	}
	if len(helpers) == 0 || len(k.cell.helperPids()) == 0 {
		t.Fatalf("group members %v besides the runner, H marks %v", helpers, k.cell.helperPids())
	}
	rep, _, err := execInterrupted(t, k, "import time\nprint('running', flush=True)\ntime.sleep(60)", testenv.Patience)
	if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) {
		t.Fatalf("reply %+v, err %v", rep, err)
	}
	for _, p := range helpers {
		if !alive(p) {
			t.Errorf("helper %d was killed by the interrupt", p)
		}
	}
}
