//go:build !windows

package kernel

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A timeout interrupts: KeyboardInterrupt in the cell, x kept.
func TestTimeoutInterruptKeepsState(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 41")
	// The timeout outlasts x += 1 (the interrupt lands in time.sleep); the
	// grace outlasts a loaded host's handling of KeyboardInterrupt.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rep, err := k.Exec(ctx, Cell{Code: "import time\nx += 1\ntime.sleep(300)", Grace: testenv.Patience})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if !errors.Is(rep.Interrupted, ErrTimeout) || rep.Status != "error" || !strings.Contains(rep.Traceback, "KeyboardInterrupt") {
		t.Fatalf("got %+v", rep)
	}
	if got := mustExec(t, k, "x").Stdout; got != "42\n" {
		t.Fatalf("x = %q after the interrupt, want 42", got)
	}
}

// timeout_action "kill": the deadline kills at once.
func TestTimeoutKillAction(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := k.Exec(ctx, Cell{Code: "import time; time.sleep(30)", KillOnTimeout: true})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	<-k.Done()
}

// A cell that swallows SIGINT is killed after the grace.
func TestInterruptGraceKills(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	// The cell swallows SIGINT with a handler that never raises: a
	// try/except around the loop is not enough, since the host repeats
	// SIGINT until the cell ends and a repeat that lands inside the except
	// block ends the cell (seen in a TCG guest at 6 s vCPU lag).
	code := "import signal, time\nhits = []\nsignal.signal(signal.SIGINT, lambda s, f: hits.append(s))\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.05)\n    if hits:\n        hits.clear()\n        print('caught', flush=True)\n"
	log := newEventLog()
	go func() {
		<-log.first // the loop runs: interrupt it
		if err := k.Interrupt(); err != nil {
			t.Error(err)
		}
	}()
	// The grace must outlast the SIGINT's delivery and the handler's print
	// (seconds of vCPU lag in a loaded TCG guest); the kill follows it.
	rep, err := k.Exec(context.Background(), Cell{Code: code, Grace: 10 * time.Second, Stream: log.add})
	if !errors.Is(err, ErrInterrupted) || rep == nil || !strings.Contains(rep.Stdout, "caught") {
		t.Fatalf("reply %+v, err = %v; want ErrInterrupted after the cell caught the SIGINT", rep, err)
	}
	<-k.Done()
}

// An interrupt that lands before the cell's code starts still stops it.
func TestInterruptBeforeCodeStarts(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	go func() {
		for k.Interrupt() != nil {
			time.Sleep(time.Millisecond)
		}
	}()
	rep, err := k.Exec(context.Background(), Cell{Code: "import time; time.sleep(300)", Grace: testenv.Patience})
	if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) || !strings.Contains(rep.Traceback, "KeyboardInterrupt") {
		t.Fatalf("reply %+v, err %v", rep, err)
	}
}

// An interrupt ends the cell's subprocesses, not the runner's watchdog.
func TestInterruptEndsSubprocesses(t *testing.T) {
	requireProc(t)
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import subprocess, os")
	events := make(chan Event, 16)
	code := "p = subprocess.Popen(['/bin/sleep', '60'])\nprint(p.pid, flush=True)\np.wait()"
	type result struct {
		rep *Reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := k.Exec(context.Background(), Cell{Code: code, Grace: testenv.Patience, Stream: func(e Event) { events <- e }})
		done <- result{rep, err}
	}()
	ev := <-events
	pid := atoi(t, string(ev.Data))
	if !alive(pid) {
		t.Fatalf("sleep %d not running", pid)
	}
	if err := k.Interrupt(); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	r := <-done
	if r.err != nil || !errors.Is(r.rep.Interrupted, ErrInterrupted) {
		t.Fatalf("got %+v, %v", r.rep, r.err)
	}
	if !waitDead(pid, testenv.Patience) {
		t.Fatalf("sleep %d survived the interrupt", pid)
	}
	if got := mustExec(t, k, "1 + 1").Stdout; got != "2\n" {
		t.Fatalf("after interrupt: %q", got)
	}
	// The watchdog survived: killing the runner still takes the group down.
	if !alive(k.Pid()) {
		t.Fatal("runner died")
	}
}

// SIGINT between cells (and repeatedly) leaves the runner working.
func TestInterruptBetweenCells(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "y = 7")
	if err := k.Interrupt(); !errors.Is(err, ErrIdle) {
		t.Fatalf("idle interrupt: %v, want ErrIdle", err)
	}
	for i := 0; i < 20; i++ {
		if err := syscall.Kill(k.Pid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the signals land while the runner waits
	if got := mustExec(t, k, "y").Stdout; got != "7\n" {
		t.Fatalf("y = %q", got)
	}
}

// A SIGINT handler a cell installs holds in later cells but never in the
// runner's own code: SIGINTs between cells (an interrupt's late repeats,
// which a loaded host can deliver after the cell ended) neither raise the
// cell's KeyboardInterrupt in the runner, which would kill the kernel, nor
// reach the next cell.
func TestCellSIGINTHandlerStaysInCells(t *testing.T) {
	requireProc(t)
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import signal\nseen = []\ndef mine(signum, frame):\n    seen.append(signum)\n    raise KeyboardInterrupt\n"+
		"signal.signal(signal.SIGINT, mine)\nx = 3")
	for range 20 {
		if err := syscall.Kill(k.Pid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, "the SIGINTs to reach the runner", func() bool { return !sigintPending(t, k.Pid()) })
	if got := mustExec(t, k, "print(x, len(seen), signal.getsignal(signal.SIGINT).__name__)").Stdout; got != "3 0 mine\n" {
		t.Fatalf("after SIGINTs between cells: %q, want x kept, none seen by the cell, its handler back", got)
	}
}

// SIGINT storms during output never corrupt the protocol. Each interrupt
// gets a generous grace: on a loaded host the default 2 s could run out
// before the interpreter handles KeyboardInterrupt, killing the kernel,
// which is not what this test checks.
func TestInterruptDuringOutput(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	for i := 0; i < 5; i++ {
		stop, stormed := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stormed)
			for {
				select {
				case <-stop:
					return
				default:
					_ = k.Interrupt()
					time.Sleep(time.Millisecond)
				}
			}
		}()
		_, err := k.Exec(context.Background(), Cell{Code: "for i in range(20000): print(i)", Grace: testenv.Patience})
		close(stop)
		<-stormed // an Interrupt in flight would land on the next cell
		if err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
	}
	if got := mustExec(t, k, "'alive'").Stdout; got != "'alive'\n" {
		t.Fatalf("after storm: %q", got)
	}
}

// A SIGINT can land where CPython does not act on it until a blocking call
// returns (after its last bytecode check, before time.sleep starts): the
// interrupt repeats SIGINT until the cell ends. The cell here stands in
// for that lost first signal with a handler that swallows it; the repeat
// ends the cell within the grace and the kernel keeps its state.
func TestInterruptRepeatsLostSIGINT(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 5")
	code := "import signal, time\nseen = []\ndef swallow_first(signum, frame):\n" +
		"    seen.append(signum)\n    if len(seen) > 1:\n        raise KeyboardInterrupt\n" +
		"signal.signal(signal.SIGINT, swallow_first)\nprint('sleeping', flush=True)\ntime.sleep(30)\n"
	log := newEventLog()
	go func() {
		<-log.first
		if err := k.Interrupt(); err != nil {
			t.Error(err)
		}
	}()
	rep, err := k.Exec(context.Background(), Cell{Code: code, Grace: testenv.Patience, Stream: log.add})
	if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) || !strings.Contains(rep.Traceback, "KeyboardInterrupt") {
		t.Fatalf("reply %+v, err = %v; want the cell interrupted by the repeated SIGINT", rep, err)
	}
	if got := mustExec(t, k, "print(x, len(seen) >= 2)").Stdout; got != "5 True\n" {
		t.Fatalf("after the interrupt: %q, want the state kept and 2 or more SIGINTs seen", got)
	}
}

// An interrupted cell reports KeyboardInterrupt structured, with the
// cell's frame and without the runner's SIGINT handler.
func TestInterruptStructuredException(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	log := newEventLog()
	go func() {
		<-log.first // the cell runs: interrupt it
		if err := k.Interrupt(); err != nil {
			t.Error(err)
		}
	}()
	rep, err := k.Exec(context.Background(), Cell{Code: "import time\nprint('started', flush=True); time.sleep(60)", Grace: testenv.Patience, Stream: log.add})
	if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) {
		t.Fatalf("reply %+v, err %v", rep, err)
	}
	e := rep.Exception
	if e == nil || e.EName != "KeyboardInterrupt" || e.EValue != "" || strings.Join(e.Traceback, "") != rep.Traceback {
		t.Fatalf("exception %+v, traceback:\n%s", e, rep.Traceback)
	}
	if !strings.Contains(rep.Traceback, `File "<cell-1>", line 2, in <module>`) || strings.Contains(rep.Traceback, "_on_sigint") {
		t.Errorf("traceback:\n%s", rep.Traceback)
	}
	requireNoOwnFrames(t, k, rep)
}

// An interrupt ends a running shell line: KeyboardInterrupt in the cell,
// its command killed, the kernel and its state kept.
func TestInterruptShellLine(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	requireIPython(t, k)
	mustExec(t, k, "kept = 1")
	log := newEventLog()
	go func() {
		<-log.first // the command runs: interrupt it
		if err := k.Interrupt(); err != nil {
			t.Error(err)
		}
	}()
	rep, err := k.Exec(context.Background(), Cell{Code: "!echo started; exec sleep 60", Grace: testenv.Patience, Stream: log.add})
	if err != nil || !errors.Is(rep.Interrupted, ErrInterrupted) || rep.Exception == nil || rep.Exception.EName != "KeyboardInterrupt" {
		t.Fatalf("reply %+v, err %v", rep, err)
	}
	requireNoOwnFrames(t, k, rep)
	if r := mustExec(t, k, "print(kept)"); r.Stdout != "1\n" {
		t.Fatalf("state after the interrupt: %+v", r)
	}
}

// An interrupt belongs to its cell: the cells after an interrupted one
// run uninterrupted (each cell has its own request, never an old one).
func TestInterruptEndsWithItsCell(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	started := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		rep, err := k.Exec(context.Background(), Cell{Code: "import time\nprint('ready', flush=True)\ntime.sleep(300)",
			Grace: testenv.Patience, Stream: func(Event) {
				select {
				case started <- struct{}{}:
				default:
				}
			}})
		if err == nil && !errors.Is(rep.Interrupted, ErrInterrupted) {
			err = errors.New("the cell was not interrupted")
		}
		done <- err
	}()
	<-started
	if err := k.Interrupt(); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		rep := mustExec(t, k, "1 + 1")
		if rep.Interrupted != nil || rep.Stdout != "2\n" {
			t.Fatalf("cell %d after the interrupt: %+v", i+1, rep)
		}
	}
}
