package daemon_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestNewChecksKernelsCanRunTheInterpreter: a sandboxed daemon refuses
// to start with a configured interpreter its kernel uids cannot run, and
// one found on PATH that they cannot run is replaced by the next usable
// python3 on PATH.
func TestNewChecksKernelsCanRunTheInterpreter(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Interpreter = privatePython(t)
	if d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger())); err == nil {
		_ = d.Shutdown(ctx)
		t.Fatal("New started with a configured interpreter kernels cannot run")
	} else if !strings.Contains(err.Error(), "kernels cannot run the default interpreter") {
		t.Errorf("New with a configured private interpreter: %v", err)
	}

	cfg = testConfig(t)
	t.Setenv("PATH", filepath.Dir(privatePython(t))+string(os.PathListSeparator)+filepath.Dir(testenv.Python))
	cfg.Interpreter = ""
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatalf("New with a private python3 first on PATH: %v", err)
	}
	defer func() { _ = d.Shutdown(ctx) }()
	res, err := d.Pool().Execute(ctx, pool.Request{Owner: "a", Code: "import sys\nprint(sys.executable)"})
	if err != nil || res.Output != testenv.Python+"\n" {
		t.Errorf("the default interpreter: %+v, %v; want %s", res, err, testenv.Python)
	}
}

// TestRequestPathsKernelsCannotReach: a request whose cwd or interpreter
// a sandboxed kernel's uid cannot search is refused up front as a bad
// request naming why, not left to fail its kernel's start.
func TestRequestPathsKernelsCannotReach(t *testing.T) {
	testenv.RequireRoot(t)
	cfg := testConfig(t)
	ctx := context.Background()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Shutdown(ctx) }()
	c := serveHandler(t, d, cfg)
	py := privatePython(t)
	for _, req := range []pool.Request{
		{Owner: "a", Cwd: filepath.Dir(py), Code: "print(1)"},
		{Owner: "a", Interpreter: py, Code: "print(1)"},
	} {
		_, err = c.Execute(ctx, req)
		if !errors.Is(err, pool.ErrBadRequest) || !strings.Contains(err.Error(), "cannot search") {
			t.Errorf("cwd %q, interpreter %q: %v, want a bad request saying kernels cannot search it", req.Cwd, req.Interpreter, err)
		}
	}
}

// TestProfilePassthroughReachesItsKernels: a name in a profile's
// passthrough reaches the kernels of that mode only.
func TestProfilePassthroughReachesItsKernels(t *testing.T) {
	t.Setenv("KP_MODE_VAR", "mode-value")
	ctx := context.Background()
	cfg := testConfig(t)
	p := cfg.Profiles[daemon.DefaultProfile]
	cfg.Profiles["plain"] = p
	p.Passthrough = []string{"KP_MODE_VAR"}
	cfg.Profiles[daemon.DefaultProfile] = p
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Shutdown(ctx) }()
	for mode, want := range map[string]string{daemon.DefaultProfile: "mode-value\n", "plain": "None\n"} {
		res, err := d.Pool().Execute(ctx, pool.Request{Owner: "a", Mode: mode, Code: "import os\nprint(os.environ.get('KP_MODE_VAR'))"})
		if err != nil || res.Output != want {
			t.Errorf("mode %s: %+v, %v; want output %q", mode, res, err, want)
		}
	}
}
