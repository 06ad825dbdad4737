package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBindGivesTheOwnersPart: a kernel started without an owner gets,
// from Bind, the cwd, environment, staging files and tool endpoint a
// kernel started with them has; the token reaches _kernpool_runtime only.
func TestBindGivesTheOwnersPart(t *testing.T) {
	spec := baseSpec(t)
	spec.Env = append(spec.Env, "GONE=1", "CHANGED=old")
	k := startKernel(t, spec, "")
	cwd := t.TempDir()
	err := k.Bind(context.Background(), Binding{
		Cwd:   cwd,
		Env:   []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "CHANGED=new", "ADDED=yes"},
		Files: map[string][]byte{"kernpool_tools.py": []byte("NAME = 'stub'\n")},
		Setup: func(staging string) ([]string, error) {
			if staging != k.StagingDir() {
				t.Errorf("setup staging = %s, want %s", staging, k.StagingDir())
			}
			return []string{EnvRPCEndpoint + "=/x/rpc.sock", EnvRPCToken + "=tok-123"}, nil
		},
	})
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	rep := mustExec(t, k, `import os, json, kernpool_tools, _kernpool_runtime as rt
e = os.environ
print(json.dumps([os.getcwd(), e.get("GONE"), e.get("CHANGED"), e.get("ADDED"), kernpool_tools.NAME,
    rt.rpc_endpoint, rt.rpc_token, [k for k in e if k.startswith("KERNPOOL_RPC")],
    oct(os.stat("kernpool_tools.py", dir_fd=None) .st_mode & 0o777) if os.path.exists("kernpool_tools.py") else "",
    e.get("TMPDIR")]))`)
	var got []any
	if err := json.Unmarshal([]byte(rep.Stdout), &got); err != nil {
		t.Fatalf("cell output %q: %v (%s)", rep.Stdout, err, rep.Traceback)
	}
	want := []any{cwd, nil, "new", "yes", "stub", "/x/rpc.sock", "tok-123", []any{}, "", filepath.Join(k.StagingDir(), "tmp")}
	if b1, b2 := mustJSON(t, got), mustJSON(t, want); b1 != b2 {
		t.Fatalf("after Bind the kernel sees\n %s\nwant\n %s", b1, b2)
	}
	st, err := os.Stat(filepath.Join(k.StagingDir(), "kernpool_tools.py"))
	if err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o600) {
		t.Fatalf("bound staging file: %v, %v", st, err)
	}
	// Bound once: a second Bind, or a Preload, is refused.
	if err := k.Bind(context.Background(), Binding{}); !errors.Is(err, ErrBound) {
		t.Fatalf("second Bind = %v, want ErrBound", err)
	}
	if err := k.Preload(context.Background(), []string{"json"}); !errors.Is(err, ErrBound) {
		t.Fatalf("Preload after Bind = %v, want ErrBound", err)
	}
}

// TestBindRefusedAfterACell: a kernel that ran a cell (its owner's code)
// can never be bound to anyone.
func TestBindRefusedAfterACell(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 1")
	if err := k.Bind(context.Background(), Binding{}); !errors.Is(err, ErrBound) {
		t.Fatalf("Bind after a cell = %v, want ErrBound", err)
	}
}

// TestBindChecksTheCwdIsTheSameDirectory: the runner refuses a cwd whose
// device and inode differ from what the daemon saw (a private /tmp hides
// the daemon's directory of that name).
func TestBindChecksTheCwdIsTheSameDirectory(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	dir := t.TempDir()
	release, err := k.claimFresh("test")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(bindRequest{Cwd: dir, Dev: 1, Ino: 1})
	err = k.op(context.Background(), "bind", string(payload))
	release()
	if err == nil || !strings.Contains(err.Error(), "another directory") {
		t.Fatalf("bind to a cwd with another inode = %v, want the runner's refusal", err)
	}
	// The kernel is alive (the caller discards it) and was not moved.
	if rep := mustExec(t, k, "import os; print(os.getcwd())"); strings.TrimSpace(rep.Stdout) != k.StagingDir() {
		t.Fatalf("cwd after a refused bind = %q", rep.Stdout)
	}
}

// TestPreloadImportsModules: preloaded modules are in sys.modules before
// the first cell, not in its namespace, and the cell counter is untouched;
// a module that does not import is an error naming it.
func TestPreloadImportsModules(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	if err := k.Preload(context.Background(), []string{"decimal", "email.mime.text"}); err != nil {
		t.Fatalf("Preload: %v", err)
	}
	rep := mustExec(t, k, "import sys\nprint('decimal' in sys.modules, 'email.mime.text' in sys.modules, 'decimal' in globals())")
	if rep.Stdout != "True True False\n" || rep.ExecutionCount != 1 {
		t.Fatalf("after Preload: %q (count %d)", rep.Stdout, rep.ExecutionCount)
	}
	k2 := startKernel(t, baseSpec(t), "")
	err := k2.Preload(context.Background(), []string{"json", "no_such_module_xyz"})
	if err == nil || !strings.Contains(err.Error(), "No module named 'no_such_module_xyz'") {
		t.Fatalf("Preload of a missing module = %v", err)
	}
	if err := k2.Preload(context.Background(), []string{"os; import x"}); err == nil {
		t.Fatal("Preload accepted a name that is not a module name")
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkBindFirstCell is Bind plus the first cell on a kernel started
// ahead (the spare path without the pool); the start is not timed.
func BenchmarkBindFirstCell(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		k := startKernel(b, baseSpec(b), "")
		if err := k.Preload(context.Background(), []string{"json"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := k.Bind(context.Background(), Binding{Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "X=1"}}); err != nil {
			b.Fatal(err)
		}
		mustExec(b, k, "x = 1")
		b.StopTimer()
		requireGone(b, k)
	}
}
