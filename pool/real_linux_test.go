package pool_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/pool"
)

// The pool's seams filled with the real adapters, as pool/daemon's
// wire.go does. They import pool, so the tests that use them live in this
// external package; the package's own tests that need a real sandbox
// (the persist ones) get it through pool.RealSandboxes, set here.

func init() {
	pool.RealSandboxes = func(t *testing.T) (pool.SandboxFactory, string) { return newRealIsolator(t) }
}

// newRealIsolator is an isolate.Isolator (cgroup, kernel uids) over a state
// dir the kernel uids can traverse, with a cgroup parent of the test's own.
func newRealIsolator(t *testing.T) (*isolate.Isolator, string) {
	t.Helper()
	return newRealIsolatorWith(t, nil)
}

// newRealIsolatorWith is newRealIsolator with edit applied to the
// isolator's config (profiles, say) before it starts.
func newRealIsolatorWith(t *testing.T, edit func(*isolate.Config)) (*isolate.Isolator, string) {
	t.Helper()
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	state := t.TempDir()
	for p := state; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := isolate.DefaultConfig(state)
	cfg.CgroupParent = testenv.CgroupParent(t, "kernpool-pooltest")
	if edit != nil {
		edit(&cfg)
	}
	iso, err := isolate.New(cfg)
	if err != nil {
		t.Fatalf("isolate.New: %v", err)
	}
	t.Cleanup(func() {
		if err := iso.Close(); err != nil {
			t.Errorf("isolator Close: %v", err)
		}
	})
	return iso, state
}

// TestOOMVerdictIsReported: a cell that outgrows its real memory cgroup
// is killed by the kernel's OOM killer, and the pool reports exactly that.
func TestOOMVerdictIsReported(t *testing.T) {
	iso, state := newRealIsolator(t)
	// The isolator is closed after the pool (cleanups run last-in first-out).
	p := newTestPool(t, func(c *pool.Config) { c.StateDir = state; c.Sandboxes = iso })
	lim := pool.Limits{MemoryMax: 64 << 20}
	run(t, p, pool.Request{Code: "x = 1", Limits: lim})
	res := run(t, p, pool.Request{Code: "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n", Limits: lim})
	wantStatus(t, res, pool.StatusError)
	want := "The session kernel was killed by the out-of-memory killer at its memory limit of 64MiB; " +
		"its state was lost. The next call starts a fresh kernel."
	if res.ExitCode != -1 || res.Error != want || !res.Kernel.OOMKilled {
		t.Fatalf("OOM result = %+v", res)
	}
	if st := p.Stats(); st.OOMKilled != 1 || st.Died != 1 {
		t.Fatalf("stats = %+v", st)
	}
	assertStagingGone(t, p, res.Kernel.ID)
	// A kernel killed by a plain SIGKILL is no OOM kill.
	res = run(t, p, pool.Request{Owner: "other", Code: "import os\nos.kill(os.getpid(), 9)", Limits: lim})
	if res.Kernel.OOMKilled || strings.Contains(res.Error, "out-of-memory") {
		t.Fatalf("SIGKILL reported as OOM: %+v", res)
	}
	if st := p.Stats(); st.OOMKilled != 1 || st.Died != 2 {
		t.Fatalf("stats after a SIGKILL = %+v", st)
	}
}

// TestEnvAndOutputWiring: the pool builds each kernel's environment with
// the real envscrub.Scrubber and cleans its output with the real pipeline:
// a secret of the daemon's environment never reaches the kernel, and its
// value is masked wherever a cell prints it.
func TestEnvAndOutputWiring(t *testing.T) {
	testenv.RequirePython(t)
	const secret = "s3cr3t-value-0123456789"
	parent := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "XDG_KEEP=kept-" + "value", "SERVICE_PASSWORD=" + secret, "EDITOR=vim"}
	scrub, err := envscrub.New(envscrub.Config{Parent: func() []string { return parent }})
	if err != nil {
		t.Fatal(err)
	}
	out := envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000}
	p := newTestPool(t, func(c *pool.Config) { c.Env = scrub; c.Output = envscrub.NewPipeline(out) })
	res := run(t, p, pool.Request{Code: "import os\nprint(sorted(k for k in os.environ if k in ('XDG_KEEP', 'SERVICE_PASSWORD', 'EDITOR')))\nprint('" + secret + "')"})
	wantStatus(t, res, pool.StatusSuccess)
	if want := "['XDG_KEEP']\n***\n"; res.Output != want {
		t.Fatalf("output = %q, want %q", res.Output, want)
	}
	res = run(t, p, pool.Request{Code: "raise ValueError('" + secret + "')"})
	wantStatus(t, res, pool.StatusError)
	if strings.Contains(res.Error, secret) || strings.Contains(res.Output, secret) || !strings.Contains(res.Error, "ValueError: ***") {
		t.Fatalf("traceback not cleaned: %+v", res)
	}
	// A refused passthrough is the client's error, carrying envscrub's.
	if _, err := p.Execute(t.Context(), pool.Request{Owner: "x", Passthrough: []string{"OPENAI_API_KEY"}, Code: "pass"}); !errors.Is(err, pool.ErrBadRequest) || !errors.Is(err, envscrub.ErrRefused) {
		t.Fatalf("refused passthrough = %v, want ErrBadRequest wrapping envscrub.ErrRefused", err)
	}
	// Output over the inline cap spills, redacted, into the daemon's spill
	// dir of the kernel (never inside its staging dir, which the kernel owns).
	res = run(t, p, pool.Request{Code: "print('y' * 3000 + '" + secret + "')"})
	if !res.StdoutTruncated || res.StdoutSpillPath == "" || res.Warning == "" || len(res.Output) > 1200 {
		t.Fatalf("spill result: truncated %v, path %q, warning %q, %d bytes inline", res.StdoutTruncated, res.StdoutSpillPath, res.Warning, len(res.Output))
	}
	spillDir := filepath.Join(pool.StateDirOf(p), "spill", res.Kernel.ID)
	if filepath.Dir(res.StdoutSpillPath) != spillDir || res.StdoutSpillName != "cell_000003_stdout.txt" {
		t.Fatalf("spill path %s (name %q) is not %s/cell_000003_stdout.txt", res.StdoutSpillPath, res.StdoutSpillName, spillDir)
	}
	if b, err := os.ReadFile(res.StdoutSpillPath); err != nil || string(b) != strings.Repeat("y", 3000)+"***\n" {
		t.Fatalf("spill file: %d bytes, %v", len(b), err)
	}
}
