package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// failRecorder is a recorder that also counts failed spawns and says so
// on failed (one signal per failure, never blocking).
type failRecorder struct {
	*recorder
	mu     sync.Mutex
	fails  map[string]int
	failed chan string
}

func (r *failRecorder) SpawnFailed(mode string) {
	r.mu.Lock()
	r.fails[mode]++
	r.mu.Unlock()
	select {
	case r.failed <- mode:
	default:
	}
}

// firstImportFails writes a module whose first import (in any kernel)
// raises and every later one succeeds; it returns the module's dir.
func firstImportFails(t *testing.T, name string) string {
	t.Helper()
	dir := testTempDir(t)
	src := fmt.Sprintf(`import os
try:
    os.close(os.open(%q, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
except FileExistsError:
    pass
else:
    raise RuntimeError("the first import of this module fails")
`, filepath.Join(dir, "imported-once"))
	if err := os.WriteFile(filepath.Join(dir, name+".py"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A spare that fails to start is reported (SpawnFailed), and the refiller
// tries the mode again by itself once the back-off (1 s) has passed:
// nothing else wakes it here.
func TestFailedSpareReportedAndRetried(t *testing.T) {
	rec := &failRecorder{recorder: newRecorder(), fails: map[string]int{}, failed: make(chan string, 1)}
	dir := firstImportFails(t, "kp_flaky_once")
	p := newTestPool(t, func(c *Config) {
		c.Env = dirEnv(dir)
		c.Observer = rec
		c.Warm = map[string]Warm{"flaky": {Spares: 1, Preload: []string{"kp_flaky_once"}}}
	})
	select {
	case mode := <-rec.failed:
		if mode != "flaky" {
			t.Fatalf("SpawnFailed(%q), want the flaky mode", mode)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the spare that failed to start was never reported")
	}
	ctx, cancel := context.WithTimeout(t.Context(), testenv.Patience)
	defer cancel()
	if err := p.WaitSpares(ctx, "flaky", 1); err != nil {
		t.Fatalf("no spare after the back-off: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if st := p.Stats(); rec.fails["flaky"] != 1 || st.SparesStarted != 1 {
		t.Fatalf("%d failures reported, %d spares started; want 1 and 1", rec.fails["flaky"], st.SparesStarted)
	}
}

// At MaxKernels, making room for one kernel stops the oldest ready spare
// and only it: the spare still starting (another mode's) keeps its start.
func TestEvictionSparesTheStartingSpareWhenAReadyOneSuffices(t *testing.T) {
	dir, lines := blockingPreload(t, "kp_spare_blocker")
	p := newTestPool(t, func(c *Config) {
		c.MaxKernels = 2
		c.Env = dirEnv(dir)
		// Sorted modes: the default spare is ready before the slow one starts.
		c.Warm = map[string]Warm{"default": {Spares: 1}, "slow": {Spares: 1, Preload: []string{"kp_spare_blocker"}}}
	})
	nextLine(t, lines, "started")
	waitSpares(t, p, "default", 1)
	var cancelled atomic.Bool
	p.mu.Lock()
	st := p.sp.starting
	if st == nil || st.cancel == nil || st.mode != "slow" {
		p.mu.Unlock()
		t.Fatalf("starting spare %+v, want the slow mode's, cancellable", st)
	}
	cancel := st.cancel
	st.cancel = func() { cancelled.Store(true); cancel() }
	p.mu.Unlock()
	// Its own limits: no spare fits, one kernel's room is needed.
	res := run(t, p, Request{Owner: "alice", Code: "40 + 2", Limits: Limits{PidsMax: 64}})
	wantStatus(t, res, StatusSuccess)
	p.mu.Lock()
	doomed := st.doomed
	p.mu.Unlock()
	if cancelled.Load() || doomed {
		t.Fatal("the starting spare was stopped though the ready one made the room")
	}
	if st := p.Stats(); st.SparesEvicted != 1 || st.Spares != 0 || st.Evicted != 0 {
		t.Fatalf("stats = %+v, want the one ready spare evicted", st)
	}
}

// secondImportWaits writes a module whose first import (in any kernel)
// passes and whose later ones say "started" on a FIFO and wait for
// release to be called. It returns the module's dir, the FIFO's lines
// (closed once the kernel holding it is gone) and release.
func secondImportWaits(t *testing.T, name string) (string, <-chan string, func()) {
	t.Helper()
	dir, lines := blockingPreload(t, name+"_unused") // its FIFO and reader
	gate := filepath.Join(dir, "release")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`import os
try:
    os.close(os.open(%q, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
except FileExistsError:
    _f = open(%q, "w", buffering=1)
    _f.write("started\n")
    open(%q).read()
`, filepath.Join(dir, "imported-once"), filepath.Join(dir, "events"), gate)
	if err := os.WriteFile(filepath.Join(dir, name+".py"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	release := func() {
		opened := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(gate, os.O_WRONLY, 0) // waits for the module's open
			if err == nil {
				err = f.Close() // its read ends
			}
			opened <- err
		}()
		select {
		case err := <-opened:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("the waiting import never opened its gate")
		}
	}
	return dir, lines, release
}

// A spare that finishes starting after a reload lowered its mode's count
// to what is ready already is stopped, not filed: the mode keeps the
// configured number of spares, not one more.
func TestSpareStartedPastALoweredCountIsStopped(t *testing.T) {
	dir, lines, release := secondImportWaits(t, "kp_second_waits")
	warm := func(n int) map[string]Warm {
		return map[string]Warm{"slow": {Spares: n, Preload: []string{"kp_second_waits"}}}
	}
	p := newTestPool(t, func(c *Config) {
		c.Env = dirEnv(dir)
		c.Warm = warm(2)
	})
	nextLine(t, lines, "started") // one spare ready, the second starting
	if err := p.SetWarm(warm(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	two := make(chan error, 1)
	go func() { two <- p.WaitSpares(ctx, "slow", 2) }()
	release()
	select {
	case <-two:
		t.Fatalf("2 spares ready with 1 configured: %v", spareIDs(p, "slow"))
	case line, ok := <-lines:
		if ok {
			t.Fatalf("the second spare's preload said %q, want its end", line)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the spare started past the lowered count neither ended nor was filed")
	}
	if ids, st := spareIDs(p, "slow"), p.Stats(); len(ids) != 1 || st.SparesStarted != 1 {
		t.Fatalf("spares %v, %d started; want the one started before the reload", ids, st.SparesStarted)
	}
}
