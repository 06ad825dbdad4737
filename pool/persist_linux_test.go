package pool

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// Lossless eviction with real kernels in real sandboxes (cgroups, kernel
// uids): checkpoints are saved and loaded inside the kernels.

// newPersistPool is a pool of real sandboxed kernels whose default mode
// persists.
func newPersistPool(t *testing.T, mods ...func(*Config)) *Pool {
	t.Helper()
	sandboxes, state := newRealIsolator(t)
	return newTestPool(t, append([]func(*Config){func(c *Config) {
		c.StateDir = state
		c.Sandboxes = sandboxes
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

// waitSaved waits for the saves of evicted kernels, which run off the
// evicting request's path.
func waitSaved(t testing.TB, p *Pool) {
	t.Helper()
	waitFor(t, "the evicted kernels' saves", func() bool { return p.Stats().KernelsSaving == 0 })
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
	waitSaved(t, p)
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
	sandboxes, state := newRealIsolator(t)
	mk := func(idle time.Duration) *Pool {
		p, err := New(Config{StateDir: state, DefaultInterpreter: testenv.Python, Sandboxes: sandboxes,
			IdleTimeout: idle, ReapInterval: 20 * time.Millisecond, Policies: map[string]CellPolicy{defaultName: {Persist: true}}})
		if err != nil {
			t.Fatal(err)
		}
		// A failed check leaves the pool open: close it (again) so its
		// kernels and mounts go before the isolator's cleanup.
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	p := mk(300 * time.Millisecond)
	run(t, p, Request{Code: "x = 'kept'"})
	waitFor(t, "the idle kernel's checkpoint", func() bool { return len(p.Checkpoints()) == 1 })
	if st := p.Stats(); st.Reaped != 1 {
		t.Fatalf("stats = %+v", st)
	}
	res := run(t, p, Request{Code: "x += '!'\nx"})
	// Nothing was lost: the warning names no lost names.
	if res.Output != "'kept!'\n" || !res.Kernel.Restored || res.Warning != "This session's previous kernel was stopped (idle); its state was restored into a new kernel (1 names)." {
		t.Fatalf("after reap: %+v", res)
	}
	waitFor(t, "the second idle checkpoint", func() bool { return len(p.Checkpoints()) == 1 })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A pool that reaps nothing: its Close saves the live kernel.
	p2 := mk(time.Hour)
	if res := run(t, p2, Request{Code: "y = 1\nx"}); res.Output != "'kept!'\n" || !res.Kernel.Restored {
		t.Fatalf("after the first pool's close: %+v", res)
	}
	if err := p2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if infos := p2.Checkpoints(); len(infos) != 1 || infos[0].Reason != string(reasonClosed) || infos[0].Names != 2 {
		t.Fatalf("checkpoints after Close = %+v", infos)
	}
	p3 := mk(time.Hour)
	defer func() { _ = p3.Close(context.Background()) }()
	if res := run(t, p3, Request{Code: "x, y"}); res.Output != "('kept!', 1)\n" || !res.Kernel.Restored || !strings.Contains(res.Warning, "(pool closed)") {
		t.Fatalf("after restart: %+v", res)
	}
}

// TestPersistCapRefusedWithNote: a state over the owner's checkpoint cap
// is refused, nothing of it is kept, and the owner's next first cell says
// so with the figures.
func TestPersistCapRefusedWithNote(t *testing.T) {
	const capBytes = 1 << 20
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 1; c.Checkpoints.MaxBytesPerOwner = capBytes })
	run(t, p, Request{Owner: "a", Code: "import os\nblob = os.urandom(3 << 20)\nsmall = 1"})
	run(t, p, Request{Owner: "b", Code: "pass"}) // evicts a (b's empty namespace is never saved)
	waitSaved(t, p)
	infos := p.Checkpoints()
	if len(infos) != 1 || infos[0].Owner != "a" || !strings.Contains(infos[0].Refused, "over the 1048564 bytes left under the owner's 1048576-byte checkpoint cap") {
		t.Fatalf("checkpoints = %+v", infos)
	}
	// Only the refusal note is on disk: no blob, no temporary file.
	files := ckptFiles(t, p)
	if len(files) != 1 || strings.Contains(filepath.Base(files[0]), ".tmp-") {
		t.Fatalf("files = %v", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() > 4096 {
		t.Fatalf("refusal file: %v %v", fi, err)
	}
	res := run(t, p, Request{Owner: "a", Code: "'blob' in globals(), 'small' in globals()"})
	if res.Output != "(False, False)\n" || res.Kernel.Restored || res.Restored != nil ||
		!strings.Contains(res.Warning, "its state was not saved: it pickles to") || !strings.Contains(res.Warning, "1048576-byte checkpoint cap") {
		t.Fatalf("after a refused save: %+v", res)
	}
	waitSaved(t, p)                // a's cell evicted b, whose save (of nothing) runs off the request path
	if len(ckptFiles(t, p)) != 0 { // a's note was consumed
		t.Fatalf("files = %v", ckptFiles(t, p))
	}
}

// TestPersistOwnCheckpointOnly: an owner never loads another owner's
// checkpoint, even with every other part of the key equal, and even when
// that checkpoint's file is placed where its own would be.
func TestPersistOwnCheckpointOnly(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 1 })
	run(t, p, Request{Owner: "a", Code: "x = 'secret of a'"})
	res := run(t, p, Request{Owner: "b", Code: "'x' in globals()"}) // evicts a
	waitSaved(t, p)
	if res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("b's first cell: %+v", res)
	}
	infos := p.Checkpoints()
	if len(infos) != 1 || infos[0].Owner != "a" {
		t.Fatalf("checkpoints = %+v", infos)
	}
	aKey := key{owner: "a", mode: defaultName, interpreter: testenv.Python}
	bKey := aKey
	bKey.owner = "b"
	aPath, bPath := p.ckpt.localPath(aKey, 1), p.ckpt.localPath(bKey, 1)
	if aPath == bPath || filepath.Dir(aPath) == filepath.Dir(bPath) {
		t.Fatal("two owners share a checkpoint path or dir")
	}
	data, err := os.ReadFile(aPath)
	if err != nil {
		t.Fatal(err)
	}
	// b's kernel goes; a's checkpoint is then planted at b's path.
	p.ShutdownOwner("b")
	if err := os.MkdirAll(filepath.Dir(bPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	res = run(t, p, Request{Owner: "b", Code: "'x' in globals()"})
	if res.Output != "False\n" || res.Kernel.Restored || res.Restored != nil {
		t.Fatalf("b loaded a's checkpoint: %+v", res)
	}
}

// TestPersistExpiredRemoved: the sweep removes checkpoints past their
// retention (and keeps the others), the reaper sweeps, and an expired
// checkpoint is never restored. The test picks the sweep's clock, so no
// host is too slow for it.
func TestPersistExpiredRemoved(t *testing.T) {
	var logs testenv.SyncBuffer
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.Retention = time.Hour
		c.ReapInterval = time.Hour // the test sweeps, at the times it picks
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	})
	run(t, p, Request{Owner: "a", Code: "x = 1"})
	run(t, p, Request{Owner: "b", Code: "pass"}) // evicts a
	waitSaved(t, p)
	if len(p.Checkpoints()) != 1 {
		t.Fatalf("checkpoints = %+v", p.Checkpoints())
	}
	p.sweepCheckpoints(time.Now())
	if len(p.Checkpoints()) != 1 {
		t.Fatalf("a sweep within the retention removed %+v", ckptFiles(t, p))
	}
	// A sweep logs what it removed, and nothing when it removed none.
	if got := logLines(&logs, "expired checkpoints removed"); len(got) != 0 {
		t.Errorf("a sweep that removed nothing logged %q", got)
	}
	p.sweepCheckpoints(time.Now().Add(time.Hour + time.Minute))
	if files := ckptFiles(t, p); len(files) != 0 {
		t.Fatalf("after a sweep past the retention: %v", files)
	}
	if got := logLines(&logs, "expired checkpoints removed"); len(got) != 1 || got[0] != "expired checkpoints removed: count=1" {
		t.Errorf("after a sweep removing a's checkpoint, log lines %q; want one with count=1", got)
	}
	if res := run(t, p, Request{Owner: "a", Code: "'x' in globals()"}); res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("after expiry: %+v", res)
	}

	// The reaper sweeps: its log says it removed the checkpoint the save
	// logged, whenever each happened.
	t.Run("reaper", func(t *testing.T) {
		var logs testenv.SyncBuffer
		q := newPersistPool(t, func(c *Config) {
			c.MaxKernels = 1
			c.Checkpoints.Retention = time.Millisecond
			c.ReapInterval = 20 * time.Millisecond
			c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
		})
		run(t, q, Request{Owner: "a", Code: "x = 1"})
		run(t, q, Request{Owner: "b", Code: "pass"}) // evicts a
		// The save is logged; only the reaper's sweep removes the file then
		// (nothing asks for a's kernel again), and it logs that it did.
		saved := func() bool { return strings.Contains(logs.String(), "checkpoint saved") }
		swept := func() bool {
			return saved() && len(ckptFiles(t, q)) == 0 && strings.Contains(logs.String(), "expired checkpoints removed")
		}
		for deadline := time.Now().Add(testenv.Patience); !swept(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no sweep by the reaper (saved: %v, files: %v); the pool's log:\n%s", saved(), ckptFiles(t, q), logs.String())
			}
		}
	})

	// Without a sweep in between, the restore itself refuses an expired one.
	t.Run("no sweep", func(t *testing.T) {
		q := newPersistPool(t, func(c *Config) {
			c.MaxKernels = 1
			c.Checkpoints.Retention = 200 * time.Millisecond
			c.ReapInterval = time.Hour
		})
		run(t, q, Request{Owner: "a", Code: "x = 1"})
		run(t, q, Request{Owner: "b", Code: "pass"}) // evicts a
		waitSaved(t, q)
		time.Sleep(300 * time.Millisecond) // the retention passes
		if res := run(t, q, Request{Owner: "a", Code: "'x' in globals()"}); res.Output != "False\n" || res.Kernel.Restored {
			t.Fatalf("expired checkpoint restored: %+v", res)
		}
	})
}

// TestPersistResetAndShutdownDelete: reset deletes the key's checkpoint
// (the reset kernel starts empty), owner shutdown deletes all of the
// owner's.
func TestPersistResetAndShutdownDelete(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 1 })
	run(t, p, Request{Owner: "a", Code: "x = 1"})
	run(t, p, Request{Owner: "b", Code: "y = 1"}) // evicts a
	waitSaved(t, p)
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Owner != "a" {
		t.Fatalf("checkpoints = %+v", infos)
	}
	res := run(t, p, Request{Owner: "a", Code: "w = 0\n'x' in globals()", Reset: true}) // evicts b
	waitSaved(t, p)
	if res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("reset cell: %+v", res)
	}
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Owner != "b" {
		t.Fatalf("checkpoints after reset = %+v", infos)
	}
	if r := run(t, p, Request{Owner: "a", Code: "x = 2", Cwd: "/usr"}); r.Status != StatusSuccess {
		t.Fatalf("%+v", r)
	}
	run(t, p, Request{Owner: "a", Code: "x = 3", Cwd: "/"}) // evicts a's /usr key
	waitSaved(t, p)
	if infos := p.Checkpoints(); len(infos) != 3 {
		t.Fatalf("checkpoints = %+v", infos)
	}
	p.ShutdownOwner("a")
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Owner != "b" {
		t.Fatalf("checkpoints after a's shutdown = %+v", infos)
	}
	p.ShutdownOwner("b")
	if files := ckptFiles(t, p); len(files) != 0 {
		t.Fatalf("files after owner shutdowns = %v", files)
	}
}

// TestPersistRestoreOnSpare: the evicted owner's next kernel is a claimed
// spare; the restore runs on it after its bind, before the first cell.
func TestPersistRestoreOnSpare(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 3
		c.Warm = map[string]Warm{defaultName: {Spares: 1}}
	})
	waitSpares(t, p, defaultName, 1)
	for _, o := range []string{"a", "b", "c"} { // each claims the spare; no refill room after c
		run(t, p, Request{Owner: o, Code: "x = 'kept by " + o + "'"})
	}
	run(t, p, Request{Owner: "d", Code: "pass"}) // cold, evicts a (saved)
	waitSaved(t, p)
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Owner != "a" {
		t.Fatalf("checkpoints = %+v", infos)
	}
	p.ShutdownOwner("d") // room for a spare again
	waitSpares(t, p, defaultName, 1)
	claimed := p.Stats().SparesClaimed
	res := run(t, p, Request{Owner: "a", Code: "x"})
	if res.Output != "'kept by a'\n" || !res.Kernel.Restored || p.Stats().SparesClaimed != claimed+1 {
		t.Fatalf("restore on a spare: %+v (claimed %d -> %d)", res, claimed, p.Stats().SparesClaimed)
	}
}

// TestPersistImportsCheckpointAhead: a persist mode's spare has the
// checkpoint module imported before its claim, a kernel spawned for a
// request right after its first cell (TestCheckpointWarm: never without
// the persist policy's flag).
func TestPersistImportsCheckpointAhead(t *testing.T) {
	const probe = "import sys\n'" + kernel.CheckpointModule + "' in sys.modules"
	check := func(p *Pool, owner, mode, want string) {
		t.Helper()
		if res := run(t, p, Request{Owner: owner, Mode: mode, Code: probe}); res.Output != want {
			t.Fatalf("%s (%s): %+v, want %q", owner, mode, res, want)
		}
	}
	// One kernel at most: no spare is refilled after the claim, so the
	// next owner's kernel is spawned for it.
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Warm = map[string]Warm{defaultName: {Spares: 1}}
	})
	waitSpares(t, p, defaultName, 1)
	check(p, "spare", defaultName, "True\n") // claims the spare
	check(p, "cold", defaultName, "False\n") // evicts spare's kernel, spawned for it
	check(p, "cold", defaultName, "True\n")  // imported after its first cell
}
