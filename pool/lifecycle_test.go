package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// blocker is a cell that announces it started and then waits for release.
type blocker struct {
	started, release string
	done             chan outcome
}

type outcome struct {
	res *Result
	err error
}

// startBlocker runs req (its Code replaced) in the background until the
// cell has started inside the kernel.
func startBlocker(t *testing.T, p *Pool, ctx context.Context, req Request) *blocker {
	t.Helper()
	dir := testTempDir(t)
	b := &blocker{started: filepath.Join(dir, "started"), release: filepath.Join(dir, "release"), done: make(chan outcome, 1)}
	req.Code = fmt.Sprintf("import os, time\nprint('partial', flush=True)\nopen(%q, 'w').close()\n"+
		"while not os.path.exists(%q):\n    time.sleep(0.005)\nprint('released')", b.started, b.release)
	go func() {
		res, err := p.Execute(ctx, req)
		b.done <- outcome{res, err}
	}()
	waitFor(t, "the blocking cell to start", func() bool { _, err := os.Stat(b.started); return err == nil })
	return b
}

func (b *blocker) let(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(b.release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (b *blocker) wait(t *testing.T) *Result {
	t.Helper()
	o := <-b.done
	if o.err != nil {
		t.Fatalf("blocking cell: %v", o.err)
	}
	return o.res
}

func TestTimeoutKillsKernelAndReportsStateLoss(t *testing.T) {
	p := newTestPool(t, killOnTimeout)
	warm := run(t, p, Request{Code: "x = 1"})
	pid := pidOf(t, p, warm.Kernel.ID)
	res := run(t, p, Request{Code: "import time\nprint('started', flush=True)\ntime.sleep(30)", Timeout: 300 * time.Millisecond})
	wantStatus(t, res, StatusTimeout)
	msg := "Cell timed out after 300ms; the session kernel was killed and its state was lost. The next call starts a fresh kernel."
	if res.ExitCode != -1 || res.Error != msg || !strings.HasSuffix(res.Output, "⏰ "+msg) {
		t.Fatalf("timeout result = %+v", res)
	}
	assertDead(t, pid)
	assertStagingGone(t, p, warm.Kernel.ID)
	next := run(t, p, Request{Code: "print('x' in globals())"})
	if next.Output != "False\n" || next.Kernel.Reused || next.Kernel.ID == warm.Kernel.ID {
		t.Fatalf("after timeout = %+v", next)
	}
	if st := p.Stats(); st.Timeouts != 1 {
		t.Fatalf("timeouts counter = %d", st.Timeouts)
	}
}

func TestTimeoutMessageInWholeSeconds(t *testing.T) {
	p := newTestPool(t, killOnTimeout)
	res := run(t, p, Request{Code: "import time; time.sleep(30)", Timeout: time.Second})
	wantStatus(t, res, StatusTimeout)
	if !strings.HasPrefix(res.Error, "Cell timed out after 1s;") || res.Output != "⏰ "+res.Error {
		t.Fatalf("timeout result = %+v", res)
	}
}

// A caller that goes away interrupts its cell; the kernel keeps its state.
func TestCancelInterruptsAndKeepsState(t *testing.T) {
	p := newTestPool(t)
	run(t, p, Request{Owner: "c", Code: "x = 5"})
	ctx, cancel := context.WithCancel(t.Context())
	b := startBlocker(t, p, ctx, Request{Owner: "c"})
	pid := p.List()[0].Pid
	cancel()
	res := b.wait(t)
	wantStatus(t, res, StatusInterrupted)
	if res.ExitCode != -1 || !res.Kernel.StatePreserved || !strings.Contains(res.Error, "variables and imports survived") ||
		!strings.HasPrefix(res.Output, "partial\n") || !strings.Contains(res.Output, "variables kept]"+StderrSeparator) {
		t.Fatalf("cancel result = %+v", res)
	}
	if !pidAlive(pid) {
		t.Fatal("the kernel died")
	}
	if next := run(t, p, Request{Owner: "c", Code: "x"}); next.Output != "5\n" || !next.Kernel.Reused {
		t.Fatalf("after the interrupt = %+v", next)
	}
}

func TestWaitingCallerCancelLeavesKernelAlone(t *testing.T) {
	p := newTestPool(t)
	b := startBlocker(t, p, t.Context(), Request{Owner: "w"})
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan outcome, 1)
	go func() {
		res, err := p.Execute(ctx, Request{Owner: "w", Code: "print('never')"})
		waiting <- outcome{res, err}
	}()
	waitFor(t, "the second caller to queue", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.users == 2
	})
	cancel()
	o := <-waiting
	if o.err != nil || o.res.Status != StatusInterrupted || o.res.Error != msgWaitAbandoned {
		t.Fatalf("abandoned wait = %+v, %v", o.res, o.err)
	}
	b.let(t)
	res := b.wait(t)
	wantStatus(t, res, StatusSuccess)
	if res.Output != "partial\nreleased\n" {
		t.Fatalf("the running cell was disturbed: %+v", res)
	}
	next := run(t, p, Request{Owner: "w", Code: "print('ok')"})
	if !next.Kernel.Reused || next.Kernel.ExecutionCount != 2 {
		t.Fatalf("the abandoned call touched the kernel: %+v", next.Kernel)
	}
}

func TestShutdownOwnerDisposesItsKernels(t *testing.T) {
	p := newTestPool(t)
	var pids []int
	for _, mode := range []string{"a", "b"} {
		res := run(t, p, Request{Owner: "gone", Mode: mode, Code: "pass"})
		pids = append(pids, pidOf(t, p, res.Kernel.ID))
	}
	keep := run(t, p, Request{Owner: "stays", Code: "y = 2"})
	b := startBlocker(t, p, t.Context(), Request{Owner: "gone", Mode: "busy"})
	for _, k := range p.List() {
		if k.Owner == "gone" && k.Mode == "busy" {
			pids = append(pids, k.Pid)
		}
	}
	if n := p.ShutdownOwner("gone"); n != 3 {
		t.Fatalf("ShutdownOwner killed %d, want 3", n)
	}
	for _, pid := range pids {
		assertDead(t, pid)
	}
	res := b.wait(t)
	wantStatus(t, res, StatusInterrupted)
	if !strings.Contains(res.Output, "owner shutdown") {
		t.Fatalf("busy cell of the shut-down owner = %+v", res)
	}
	if list := p.List(); len(list) != 1 || list[0].ID != keep.Kernel.ID {
		t.Fatalf("after shutdown: %+v", list)
	}
	again := run(t, p, Request{Owner: "gone", Mode: "a", Code: "pass"})
	if again.Kernel.Reused {
		t.Fatal("the owner's next call reused a disposed kernel")
	}
	if n := p.ShutdownOwner("nobody"); n != 0 {
		t.Fatalf("ShutdownOwner(nobody) = %d", n)
	}
}

func TestKillByID(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: "pass"})
	pid := pidOf(t, p, res.Kernel.ID)
	if err := p.Kill(res.Kernel.ID); err != nil {
		t.Fatal(err)
	}
	assertDead(t, pid)
	assertStagingGone(t, p, res.Kernel.ID)
	if err := p.Kill(res.Kernel.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Kill = %v, want ErrNotFound", err)
	}
	if err := p.Kill("k0000000000000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Kill(unknown) = %v", err)
	}
	b := startBlocker(t, p, t.Context(), Request{})
	busy := p.List()[0]
	if err := p.Kill(busy.ID); err != nil {
		t.Fatal(err)
	}
	assertDead(t, busy.Pid)
	out := b.wait(t)
	wantStatus(t, out, StatusInterrupted)
	// Python-level output of a killed cell is lost with the kernel (as in
	// the reference); the marker names who killed it.
	if !strings.HasSuffix(out.Output, "[execution interrupted — killed]") || out.Error != msgInterrupted {
		t.Fatalf("killed cell output = %q", out.Output)
	}
}

func TestLRUCapEvictsAcrossOwners(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.MaxKernels = 2 })
	a := run(t, p, Request{Owner: "a", Code: "pass"})
	pidA := pidOf(t, p, a.Kernel.ID)
	b := run(t, p, Request{Owner: "b", Code: "pass"})
	run(t, p, Request{Owner: "a", Code: "pass"}) // a is now more recent than b
	pidB := pidOf(t, p, b.Kernel.ID)
	c := run(t, p, Request{Owner: "c", Code: "pass"})
	wantStatus(t, c, StatusSuccess)
	assertDead(t, pidB)
	assertStagingGone(t, p, b.Kernel.ID)
	if !pidAlive(pidA) {
		t.Fatal("the recently used kernel was evicted")
	}
	list := p.List()
	if len(list) != 2 || list[0].Owner != "a" || list[1].Owner != "c" {
		t.Fatalf("after eviction: %+v", list)
	}
	if st := p.Stats(); st.Evicted != 1 || st.KernelsLive != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestBusyKernelIsNeverEvicted(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.MaxKernels = 1 })
	b := startBlocker(t, p, t.Context(), Request{Owner: "busy"})
	pid := p.List()[0].Pid
	_, err := p.Execute(t.Context(), Request{Owner: "other", Code: "pass"})
	if !errors.Is(err, ErrCapacity) {
		t.Fatalf("err = %v, want ErrCapacity", err)
	}
	if !pidAlive(pid) {
		t.Fatal("the busy kernel was evicted")
	}
	b.let(t)
	wantStatus(t, b.wait(t), StatusSuccess)
	// Idle now: the next owner evicts it.
	run(t, p, Request{Owner: "other", Code: "pass"})
	assertDead(t, pid)
	if st := p.Stats(); st.CapacityRefusals != 1 || st.Evicted != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestIdleKernelsAreReaped(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond; c.ReapInterval = 20 * time.Millisecond })
	res := run(t, p, Request{Code: "pass"})
	pid := pidOf(t, p, res.Kernel.ID)
	waitFor(t, "the reaper", func() bool { return len(p.List()) == 0 && !pidAlive(pid) })
	waitFor(t, "the reaped staging dir to go", func() bool {
		_, err := os.Stat(filepath.Join(p.cfg.StateDir, "kernels", res.Kernel.ID))
		return os.IsNotExist(err)
	})
	if st := p.Stats(); st.Reaped != 1 {
		t.Fatalf("reaped counter = %d", st.Reaped)
	}
	// A busy kernel outliving the idle timeout is not reaped. The event
	// that proves it: the reaper pass that reaps an idle kernel started
	// after the busy one (so idle for less long) spares the busy kernel.
	b := startBlocker(t, p, t.Context(), Request{})
	ks := p.List()
	if len(ks) != 1 {
		t.Fatalf("with a cell running: kernels %+v, want the busy one", ks)
	}
	busy := ks[0]
	idle := run(t, p, Request{Owner: "idle", Code: "pass"})
	idlePid := pidOf(t, p, idle.Kernel.ID)
	// At least 2: a reaper that also took the busy kernel counts 3, and
	// is told by the checks below at once.
	waitFor(t, "the reaper to reap the idle kernel", func() bool { return p.Stats().Reaped >= 2 && !pidAlive(idlePid) })
	if ks, st := p.List(), p.Stats(); len(ks) != 1 || ks[0].ID != busy.ID || !pidAlive(busy.Pid) || st.Reaped != 2 {
		t.Fatalf("after the reaper pass: kernels %+v, %d reaped; want only the busy %s alive, 2 reaped", ks, st.Reaped, busy.ID)
	}
	b.let(t)
	wantStatus(t, b.wait(t), StatusSuccess)
}

func TestReapOnAcquire(t *testing.T) {
	// The ticker is slow; the next Execute reaps, as the reference does.
	p := newTestPool(t, func(c *Config) { c.IdleTimeout = 50 * time.Millisecond; c.ReapInterval = time.Hour })
	res := run(t, p, Request{Owner: "old", Code: "pass"})
	pid := pidOf(t, p, res.Kernel.ID)
	time.Sleep(100 * time.Millisecond)
	run(t, p, Request{Owner: "new", Code: "pass"})
	assertDead(t, pid)
}

func TestCloseDrainsRunningCells(t *testing.T) {
	p := newTestPool(t)
	b := startBlocker(t, p, t.Context(), Request{})
	pid := p.List()[0].Pid
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	waitFor(t, "Close to refuse new cells", func() bool {
		_, err := p.Execute(t.Context(), Request{Owner: "late", Code: "pass"})
		return errors.Is(err, ErrClosed)
	})
	b.let(t)
	res := b.wait(t)
	wantStatus(t, res, StatusSuccess)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
	assertDead(t, pid)
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestCloseKillsAfterGrace(t *testing.T) {
	p := newTestPool(t)
	b := startBlocker(t, p, t.Context(), Request{})
	idle := run(t, p, Request{Owner: "idle", Code: "pass"})
	pids := []int{p.List()[0].Pid, pidOf(t, p, idle.Kernel.ID)}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the drain cut short", err)
	}
	for _, pid := range pids {
		assertDead(t, pid)
	}
	res := b.wait(t)
	wantStatus(t, res, StatusInterrupted)
	if !strings.Contains(res.Output, "pool closed") {
		t.Fatalf("cut cell = %+v", res)
	}
	if _, err := p.Execute(t.Context(), Request{Code: "pass"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Execute after Close = %v", err)
	}
}
