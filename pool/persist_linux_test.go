package pool

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// Lossless eviction with real kernels in real sandboxes (cgroups, kernel
// uids): checkpoints are saved and loaded inside the kernels.

// newPersistPool is a pool of real sandboxed kernels whose default mode
// persists.
func newPersistPool(t *testing.T, mods ...func(*Config)) *Pool {
	t.Helper()
	iso, state := newRealIsolator(t)
	return newTestPool(t, append([]func(*Config){func(c *Config) {
		c.StateDir = state
		c.Sandboxes = realSandboxes{iso}
		c.Policies = map[string]CellPolicy{defaultName: {Persist: true}}
	}}, mods...)...)
}

// ckptFiles lists the files (checkpoints and anything else) under the
// checkpoint dir.
func ckptFiles(t *testing.T, p *Pool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(p.ckpt.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const stateCell = `x = 41
d = {"k": [1, 2], "s": "v"}
from dataclasses import dataclass
import threading, json as j

@dataclass
class Point:
    a: int
    b: str

pt = Point(1, "z")
lock = threading.Lock()
`

// TestPersistEvictionKeepsState: with max_kernels = 2 and three owners,
// the evicted owner's x, a dict and a dataclass instance survive, an
// import-as comes back, and the lock is reported lost.
func TestPersistEvictionKeepsState(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 2 })
	first := run(t, p, Request{Owner: "a", Code: stateCell})
	wantStatus(t, first, StatusSuccess)
	run(t, p, Request{Owner: "b", Code: "y = 2"})
	run(t, p, Request{Owner: "c", Code: "z = 3"}) // evicts a (least recently used)
	if st := p.Stats(); st.Evicted != 1 {
		t.Fatalf("stats = %+v, want one eviction", st)
	}
	infos := p.Checkpoints()
	if len(infos) != 1 || infos[0].Owner != "a" || infos[0].Reason != string(reasonEvicted) || infos[0].Lost != 1 || infos[0].Bytes <= 0 || infos[0].Refused != "" {
		t.Fatalf("checkpoints = %+v", infos)
	}
	files := ckptFiles(t, p)
	if len(files) != 1 {
		t.Fatalf("checkpoint files = %v", files)
	}
	for path, want := range map[string]os.FileMode{files[0]: 0o600, filepath.Dir(files[0]): 0o700 | os.ModeDir, p.ckpt.dir: 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	res := run(t, p, Request{Owner: "a", Code: "print(x, d, pt, j.dumps([1]), type(pt).__name__, Point(2, 'y').a)\n'lock' in globals()"})
	wantStatus(t, res, StatusSuccess)
	if want := "41 {'k': [1, 2], 's': 'v'} Point(a=1, b='z') [1] Point 2\nFalse\n"; res.Output != want {
		t.Fatalf("output after restore = %q, want %q", res.Output, want)
	}
	if res.Kernel.ID == first.Kernel.ID || res.Kernel.Reused || !res.Kernel.Restored {
		t.Fatalf("kernel block = %+v", res.Kernel)
	}
	wantRestored := []string{"Point", "d", "dataclass", "j", "pt", "threading", "x"}
	if !slices.Equal(res.Restored, wantRestored) || !slices.Equal(res.Lost, []string{"lock"}) {
		t.Fatalf("restored %q lost %q, want %q and [lock]", res.Restored, res.Lost, wantRestored)
	}
	if !strings.Contains(res.Warning, "(evicted)") || !strings.Contains(res.Warning, "Lost (could not be saved or restored, define them again): lock.") {
		t.Fatalf("warning = %q", res.Warning)
	}
	// a's checkpoint was consumed; a's new kernel evicted b, now saved.
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Owner != "b" || len(ckptFiles(t, p)) != 1 {
		t.Fatalf("checkpoints after restore = %+v", infos)
	}
	next := run(t, p, Request{Owner: "a", Code: "x"})
	if next.Kernel.Restored || next.Restored != nil || next.Warning != "" || next.Output != "41\n" {
		t.Fatalf("second cell after restore = %+v", next)
	}
}

// TestPersistIdleReapAndClose: a reaped kernel's state comes back, and so
// does the state of kernels a closing pool stopped, in a new pool over the
// same state dir (what a daemon restart does).
func TestPersistIdleReapAndClose(t *testing.T) {
	iso, state := newRealIsolator(t)
	mk := func(idle time.Duration) *Pool {
		p, err := New(Config{StateDir: state, DefaultInterpreter: testenv.Python, Sandboxes: realSandboxes{iso},
			IdleTimeout: idle, ReapInterval: 20 * time.Millisecond, Policies: map[string]CellPolicy{defaultName: {Persist: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := mk(300 * time.Millisecond)
	run(t, p, Request{Code: "x = 'kept'"})
	waitFor(t, "the idle kernel's checkpoint", func() bool { return len(p.Checkpoints()) == 1 })
	if st := p.Stats(); st.Reaped != 1 {
		t.Fatalf("stats = %+v", st)
	}
	res := run(t, p, Request{Code: "x += '!'\nx"})
	if res.Output != "'kept!'\n" || !res.Kernel.Restored || !strings.Contains(res.Warning, "(idle)") {
		t.Fatalf("after reap: %+v", res)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Reason != string(reasonClosed) {
		t.Fatalf("checkpoints after Close = %+v", infos)
	}
	p2 := mk(time.Hour)
	defer func() { _ = p2.Close(context.Background()) }()
	res = run(t, p2, Request{Code: "x"})
	if res.Output != "'kept!'\n" || !res.Kernel.Restored {
		t.Fatalf("after restart: %+v", res)
	}
}
