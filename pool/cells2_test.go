package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// killOnTimeout configures the reference's timeout_action "kill".
func killOnTimeout(c *Config) {
	c.Policies = map[string]CellPolicy{defaultName: {TimeoutAction: TimeoutKill}}
}

// The timeout's interrupt ends the cell and keeps the kernel's state. The
// grace is generous: on a loaded host the default 2 s could run out before
// the interpreter handles KeyboardInterrupt, which this test does not
// check (TestTimeoutGraceKillsStubbornCell does).
func TestTimeoutInterruptKeepsVariables(t *testing.T) {
	p := newTestPool(t, func(c *Config) {
		c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: testenv.Patience}}
	})
	warm := run(t, p, Request{Code: "x = 1"})
	// The timeout outlasts the two statements before the sleep: they
	// compile and run at once, so the interrupt lands in time.sleep.
	res := run(t, p, Request{Code: "import time\nx = 2\nprint('started', flush=True)\ntime.sleep(300)", Timeout: time.Second})
	wantStatus(t, res, StatusTimeout)
	if !res.Kernel.StatePreserved || res.ExitCode != -1 || !strings.Contains(res.Error, "Its variables and imports survived") ||
		!strings.HasPrefix(res.Output, "started\n") || strings.Contains(res.Output, "_on_sigint") {
		t.Fatalf("timeout result = %+v", res)
	}
	next := run(t, p, Request{Code: "x"})
	if next.Output != "2\n" || next.Kernel.ID != warm.Kernel.ID || !next.Kernel.StatePreserved {
		t.Fatalf("after the timeout = %+v", next)
	}
}

func TestTimeoutGraceKillsStubbornCell(t *testing.T) {
	p := newTestPool(t, func(c *Config) {
		c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: 300 * time.Millisecond}}
	})
	warm := run(t, p, Request{Code: "x = 1"})
	pid := pidOf(t, p, warm.Kernel.ID)
	code := "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
	res := run(t, p, Request{Code: code, Timeout: 200 * time.Millisecond})
	wantStatus(t, res, StatusTimeout)
	want := "Cell timed out after 200ms and did not stop within the 300ms interrupt grace; the session kernel was killed and its state was lost. The next call starts a fresh kernel."
	if res.Kernel.StatePreserved || res.Error != want {
		t.Fatalf("result = %+v", res)
	}
	assertDead(t, pid)
}

// SetPolicies (the daemon's reload) changes what the next timeout does
// on a kernel already running; a policy that does not validate is
// refused and the running one stays.
func TestSetPoliciesAppliesToNextCell(t *testing.T) {
	p := newTestPool(t)
	warm := run(t, p, Request{Code: "x = 1"})
	pid := pidOf(t, p, warm.Kernel.ID)
	if err := p.SetPolicies(map[string]CellPolicy{defaultName: {TimeoutAction: "pause"}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("SetPolicies with timeout action \"pause\": %v, want ErrBadRequest", err)
	}
	sleep := Request{Code: "import time\ntime.sleep(30)", Timeout: 300 * time.Millisecond}
	if res := run(t, p, sleep); res.Status != StatusTimeout || !res.Kernel.StatePreserved {
		t.Fatalf("timeout under the default policy (interrupt) = %+v", res)
	}
	if err := p.SetPolicies(map[string]CellPolicy{defaultName: {TimeoutAction: TimeoutKill}}); err != nil {
		t.Fatal(err)
	}
	res := run(t, p, sleep)
	if res.Status != StatusTimeout || res.Kernel.StatePreserved || res.Kernel.ID != warm.Kernel.ID {
		t.Fatalf("timeout after SetPolicies(kill) = %+v", res)
	}
	assertDead(t, pid)
}

func TestSysExitCode(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: "import sys\nsys.exit(3)"})
	if res.ExitCode != 3 || !res.Kernel.Ended || res.Kernel.StatePreserved {
		t.Fatalf("sys.exit(3) = %+v", res)
	}
}

func TestPoolInterruptAndVariables(t *testing.T) {
	p := newTestPool(t)
	warm := run(t, p, Request{Owner: "o", Code: "y = [1, 2]"})
	id := warm.Kernel.ID
	if err := p.Interrupt(id); err == nil || !strings.Contains(err.Error(), "no cell is running") {
		t.Fatalf("idle interrupt: %v", err)
	}
	v, err := p.Variables(t.Context(), id)
	if err != nil || len(v.Variables) != 1 || v.Variables[0].Name != "y" || v.Variables[0].Repr != "[1, 2]" {
		t.Fatalf("variables %+v, %v", v, err)
	}
	b := startBlocker(t, p, t.Context(), Request{Owner: "o"})
	if _, err := p.Variables(t.Context(), id); err == nil || !strings.Contains(err.Error(), "running a cell") {
		t.Fatalf("variables while busy: %v", err)
	}
	if ids := p.InterruptOwner("o", ""); len(ids) != 1 || ids[0] != id {
		t.Fatalf("interrupted %v", ids)
	}
	res := b.wait(t)
	wantStatus(t, res, StatusInterrupted)
	if !res.Kernel.StatePreserved || !strings.Contains(res.Error, "interrupted by request") {
		t.Fatalf("interrupted = %+v", res)
	}
}

var _ = context.Background

// killNewKernels is an Observer that kills each of the first n kernels
// the pool starts as it is told of it: after the spawn, before the pool
// writes the kernel's first cell (spawnInto reports the start first).
type killNewKernels struct {
	*recorder
	p      *Pool
	n      int
	killed int
}

func (o *killNewKernels) KernelStarted(mode string) {
	o.recorder.KernelStarted(mode)
	if o.killed == o.n {
		return
	}
	o.killed++
	for _, k := range o.p.List() {
		if lv := o.p.byIDForTest(k.ID); lv != nil {
			_ = lv.k.Kill()
			<-lv.k.Done()
		}
	}
}

// A kernel found dead before its cell was written is replaced once, not
// again and again: with the first two kernels dying so, the cell ends
// on the second with the death reported, and a third is never started.
func TestKernelDeadBeforeItsCellIsRetriedOnce(t *testing.T) {
	obs := &killNewKernels{recorder: newRecorder(), n: 2}
	p := newTestPool(t, func(c *Config) { c.Observer = obs })
	obs.p = p
	res := run(t, p, Request{Code: "print('ran')"})
	obs.mu.Lock()
	starts := obs.starts
	obs.mu.Unlock()
	if res.Status != StatusError || !strings.Contains(res.Error, "failed before running the cell") || strings.Contains(res.Output, "ran") || starts != 2 {
		t.Fatalf("cell on two kernels dead before it = %+v after %d kernel starts; want it failed after 2", res, starts)
	}
	// The error names why the kernel ended (it was killed), not only that
	// Exec found it closed.
	const want = "The session kernel failed before running the cell (killed: kernel ended); its state was lost. The next call starts a fresh kernel."
	if res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
}

// Kill ends that kernel only and counts it once in PoolStats.Killed; a
// second Kill of the id finds nothing and counts nothing; an owner
// shutdown counts the kernels it ends.
func TestKillCountsOnce(t *testing.T) {
	p := newTestPool(t)
	a := run(t, p, Request{Owner: "a", Code: "pass"})
	b := run(t, p, Request{Owner: "b", Code: "pass"})
	bPid := pidOf(t, p, b.Kernel.ID)
	if err := p.Kill(a.Kernel.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(a.Kernel.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Kill = %v, want ErrNotFound", err)
	}
	if st := p.Stats(); st.Killed != 1 || st.KernelsLive != 1 || !pidAlive(bPid) {
		t.Fatalf("after killing a: killed %d, live %d, b alive %v; want 1, 1, true", st.Killed, st.KernelsLive, pidAlive(bPid))
	}
	// An owner shutdown counts its kernels killed too.
	if n := p.ShutdownOwner("b"); n != 1 {
		t.Fatalf("ShutdownOwner(b) = %d, want 1", n)
	}
	if st := p.Stats(); st.Killed != 2 || st.KernelsLive != 0 {
		t.Fatalf("after b's shutdown: killed %d, live %d; want 2, 0", st.Killed, st.KernelsLive)
	}
}

// PoolStats counts the kernels alive (an ended one is not) and those
// running a cell (a drain's cells_running): a, b alive, b busy; once b's
// cell ends, none busy.
func TestStatsCountLiveAndBusy(t *testing.T) {
	p := newTestPool(t)
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "pass"}), StatusSuccess)
	if res := run(t, p, Request{Owner: "x", Code: "import sys\nsys.exit(0)"}); !res.Kernel.Ended {
		t.Fatalf("sys.exit: %+v", res)
	}
	b := startBlocker(t, p, t.Context(), Request{Owner: "b"})
	if st := p.Stats(); st.KernelsLive != 2 || st.KernelsBusy != 1 {
		t.Errorf("with b's cell running: live %d, busy %d; want 2, 1", st.KernelsLive, st.KernelsBusy)
	}
	b.let(t)
	wantStatus(t, b.wait(t), StatusSuccess)
	if st := p.Stats(); st.KernelsLive != 2 || st.KernelsBusy != 0 {
		t.Errorf("after b's cell: live %d, busy %d; want 2, 0", st.KernelsLive, st.KernelsBusy)
	}
}
