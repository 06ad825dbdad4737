package pool

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A kernel still starting (its spawn held in the sandbox's Prepare) has a
// slot and a caller but no kernel yet: PoolStats counts it as live
// ("live (or starting)") and busy, and once its cell ran, live and idle.
func TestStatsCountAStartingKernel(t *testing.T) {
	f := &sandboxFactory{gate: make(chan struct{}), entered: make(chan struct{})}
	p := newTestPool(t, func(c *Config) { c.Sandboxes = f })
	done := make(chan outcome, 1)
	go func() {
		res, err := p.Execute(t.Context(), Request{Code: "pass"})
		done <- outcome{res, err}
	}()
	<-f.entered
	// Errorf, not Fatalf: the gate must open, or the cleanup's Close
	// waits for the held spawn forever.
	if st := p.Stats(); st.KernelsLive != 1 || st.KernelsBusy != 1 {
		t.Errorf("while the kernel starts: live %d, busy %d; want 1, 1", st.KernelsLive, st.KernelsBusy)
	}
	close(f.gate)
	if o := <-done; o.err != nil || o.res.Status != StatusSuccess {
		t.Fatalf("cell = %+v, %v", o.res, o.err)
	}
	if st := p.Stats(); st.KernelsLive != 1 || st.KernelsBusy != 0 {
		t.Errorf("after the cell: live %d, busy %d; want 1, 0", st.KernelsLive, st.KernelsBusy)
	}
}

// List's idle_seconds is 0 for a kernel running a cell and counts from
// its last cell's end for an idle one.
func TestListIdleSecondsOnlyForIdleKernels(t *testing.T) {
	p := newTestPool(t)
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "pass"}), StatusSuccess)
	b := startBlocker(t, p, t.Context(), Request{Owner: "b"})
	for _, k := range p.List() {
		if busy := k.Owner == "b"; k.Busy != busy || (busy && k.IdleSeconds != 0) || (!busy && k.IdleSeconds <= 0) {
			t.Errorf("kernel of %s: busy %v, idle_seconds %v; want busy %v, idle_seconds 0 when busy, above 0 when idle", k.Owner, k.Busy, k.IdleSeconds, busy)
		}
	}
	b.let(t)
	wantStatus(t, b.wait(t), StatusSuccess)
	if ks := p.List(); len(ks) != 2 || ks[0].IdleSeconds <= 0 || ks[1].IdleSeconds <= 0 {
		t.Errorf("after b's cell: %+v; want 2 kernels idle for some time", ks)
	}
}

// logLines returns the pool's log lines holding msg, from msg on
// (hclog's "[INFO]  pool: msg: k=v").
func logLines(logs *testenv.SyncBuffer, msg string) []string {
	return logLinesAt(logs, "[INFO] ", msg)
}

// logLinesAt is logLines at another level ("[WARN] ").
func logLinesAt(logs *testenv.SyncBuffer, level, msg string) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, level+" pool: "+msg+":") {
			out = append(out, l[strings.Index(l, msg):])
		}
	}
	return out
}

// ShutdownOwner and Close log one line with the number of kernels they
// killed, and none when they killed none: operators read these lines.
func TestShutdownAndCloseLogWhatTheyKilled(t *testing.T) {
	var logs testenv.SyncBuffer
	p := newTestPool(t, func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	})
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "pass"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "b", Code: "pass"}), StatusSuccess)
	if n := p.ShutdownOwner("nobody"); n != 0 {
		t.Fatalf("ShutdownOwner(nobody) = %d, want 0", n)
	}
	if got := logLines(&logs, "owner shut down"); len(got) != 0 {
		t.Errorf("after shutting down an owner without kernels, log lines %q; want none", got)
	}
	if n := p.ShutdownOwner("a"); n != 1 {
		t.Fatalf("ShutdownOwner(a) = %d, want 1", n)
	}
	if got := logLines(&logs, "owner shut down"); len(got) != 1 || got[0] != "owner shut down: owner=a kernels=1" {
		t.Errorf("after shutting down a, log lines %q; want one naming a and 1 kernel", got)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logLines(&logs, "pool closed"); len(got) != 1 || got[0] != "pool closed: kernels_killed=1" {
		t.Errorf("after Close with b's kernel, log lines %q; want one with 1 kernel killed", got)
	}

	var empty testenv.SyncBuffer
	q := newTestPool(t, func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &empty})
	})
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logLines(&empty, "pool closed"); len(got) != 0 {
		t.Errorf("after Close of a pool without kernels, log lines %q; want none", got)
	}
}

// Close of a pool running no cell has nothing to drain: even with its
// context already done it is a complete drain (nil), and it kills the
// idle kernel. A Close that waited for a drain here would report it cut
// short, or hang with a context that never ends.
func TestCloseOfAnIdlePoolIsNotCutShort(t *testing.T) {
	p := newTestPool(t)
	pid := pidOf(t, p, run(t, p, Request{Code: "pass"}).Kernel.ID)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Close(done); err != nil {
		t.Fatalf("Close of an idle pool with its context done = %v, want nil", err)
	}
	assertDead(t, pid)
}

// A reload that replaces spares logs how many it stopped; one that changes
// nothing logs nothing.
func TestSetWarmLogsWhatItReplaced(t *testing.T) {
	var logs testenv.SyncBuffer
	p := newTestPool(t, withWarm(map[string]Warm{"default": {Spares: 2, Profile: "v1"}}), func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	})
	waitSpares(t, p, "default", 2)
	if err := p.SetWarm(map[string]Warm{"default": {Spares: 2, Profile: "v1"}}); err != nil {
		t.Fatal(err)
	}
	if got := logLines(&logs, "spare kernels replaced"); len(got) != 0 {
		t.Errorf("after a reload that changed nothing, log lines %q; want none", got)
	}
	if err := p.SetWarm(map[string]Warm{"default": {Spares: 2, Profile: "v2"}}); err != nil {
		t.Fatal(err)
	}
	if got := logLines(&logs, "spare kernels replaced"); len(got) != 1 || got[0] != "spare kernels replaced: stopped=2" {
		t.Errorf("after a profile change, log lines %q; want one saying 2 stopped", got)
	}
}

// A newer generation logs one warning with the number of the owner's
// kernels it dropped, and none when the owner had none here.
func TestFenceLogsWhatItDropped(t *testing.T) {
	const msg = "owner placed here under a newer generation: its kernels from before are dropped unsaved"
	var logs testenv.SyncBuffer
	p := newTestPool(t, func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	})
	if err := p.Fence("o", 1); err != nil {
		t.Fatal(err)
	}
	if got := logLinesAt(&logs, "[WARN] ", msg); len(got) != 0 {
		t.Errorf("after fencing an owner without kernels, log lines %q; want none", got)
	}
	wantStatus(t, run(t, p, Request{Owner: "o", Code: "pass"}), StatusSuccess)
	if err := p.Fence("o", 2); err != nil {
		t.Fatal(err)
	}
	if got := logLinesAt(&logs, "[WARN] ", msg); len(got) != 1 || got[0] != msg+": owner=o generation=2 previous=1 kernels=1" {
		t.Errorf("after a newer generation dropped one kernel, log lines %q; want one saying 1", got)
	}
}
