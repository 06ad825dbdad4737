package pool_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// hostileUID runs the spill test's kernel: a uid with no account.
const hostileUID = 64123

// uidSandbox runs a kernel as another uid and gid in its own process
// group, its staging tree chowned to it (what isolate does, without
// cgroups), so that the spill dir's ownership is what stops the kernel.
type uidSandbox struct {
	*kernel.ProcessGroup
	uid int
}

func (s *uidSandbox) Prepare(cmd *exec.Cmd, staging string) error {
	if err := s.ProcessGroup.Prepare(cmd, staging); err != nil {
		return err
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid)}
	return filepath.WalkDir(staging, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, s.uid, s.uid)
	})
}

func (s *uidSandbox) UID() int { return s.uid }

type uidSandboxes struct{ uid int }

func (f uidSandboxes) NewSandbox(string, string, string, pool.Limits) (kernel.Sandbox, error) {
	return &uidSandbox{ProcessGroup: kernel.NewProcessGroup(), uid: f.uid}, nil
}

// A kernel running as its own uid reads its spill at the path the result
// names, but cannot write, remove, replace or redirect it: the spill dir
// is the daemon's (setgid 0750, the kernel's group), the files 0640.
func TestHostileSpillSwap(t *testing.T) {
	testenv.RequireRoot(t)
	state, err := os.MkdirTemp("", "kpspill")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	if err := os.Chmod(state, 0o711); err != nil { // kernels traverse it
		t.Fatal(err)
	}
	p := newTestPool(t, func(c *pool.Config) {
		c.StateDir, c.Output, c.Sandboxes = state, envscrub.NewPipeline(envscrub.OutputConfig{}), uidSandboxes{hostileUID}
	})
	first := run(t, p, pool.Request{Owner: "a", Code: "print('a' * 60000)"})
	dir := filepath.Join(state, "spill", first.Kernel.ID)
	if first.StdoutSpillPath != filepath.Join(dir, "cell_000001_stdout.txt") {
		t.Fatalf("spill path %q, want it in %s", first.StdoutSpillPath, dir)
	}
	second := run(t, p, pool.Request{Owner: "a", Code: fmt.Sprintf(`import os
spill = %q
d = os.path.dirname(spill)
out = []
def attempt(name, f):
    try:
        f()
        out.append(name + ":allowed")
    except OSError as e:
        out.append(name + ":" + type(e).__name__)
attempt("read", lambda: open(spill).read(10))
attempt("append", lambda: open(spill, "a"))
attempt("unlink", lambda: os.unlink(spill))
attempt("plant", lambda: os.symlink("/etc/shadow", os.path.join(d, "cell_000002_stdout.txt")))
attempt("swap-dir", lambda: os.rename(d, d + ".old"))
attempt("old-staging-spill", lambda: os.symlink("/etc", "spill"))
print(" ".join(out))
print("b" * 60000)`, first.StdoutSpillPath)})
	want := "read:allowed append:PermissionError unlink:PermissionError plant:PermissionError swap-dir:PermissionError old-staging-spill:allowed"
	if !strings.HasPrefix(second.Output, want+"\n") {
		t.Fatalf("kernel's attempts: %.200q, want %q", second.Output, want)
	}
	path := filepath.Join(dir, "cell_000002_stdout.txt")
	data, err := os.ReadFile(path)
	if second.StdoutSpillPath != path || err != nil || string(data) != want+"\n"+strings.Repeat("b", 60000)+"\n" {
		t.Fatalf("second spill %q: %d bytes, %v", second.StdoutSpillPath, len(data), err)
	}
	assertOwner(t, dir, 0, hostileUID, fs.ModeDir|fs.ModeSetgid|0o750)
	assertOwner(t, path, 0, hostileUID, 0o640)
	assertOwner(t, filepath.Join(state, "spill"), 0, 0, fs.ModeDir|0o711)
	if err := p.Kill(first.Kernel.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("spill dir survived its kernel: %v", err)
	}
}

func assertOwner(t *testing.T, path string, uid, gid int, mode fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid || fi.Mode()&(fs.ModePerm|fs.ModeDir|fs.ModeSetgid|fs.ModeSymlink) != mode {
		t.Fatalf("%s: %d:%d %v, want %d:%d %v", path, st.Uid, st.Gid, fi.Mode(), uid, gid, mode)
	}
}

// 25 cells spilling 2 MB each against the default quota (4 x 5,000,000
// bytes): the oldest spills go first, the kernel's spill dir never holds
// more than the quota, and the daemon's memory stays flat.
func TestHostileSpillQuota(t *testing.T) {
	p := newTestPool(t, func(c *pool.Config) { c.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) })
	var last *pool.Result
	underAttack(t, p, func() {
		for i := 1; i <= 25; i++ {
			last = run(t, p, pool.Request{Owner: "a", Code: "import os\nprint('x' * 1_000_000, end='')\nos.write(1, b'y' * 1_000_000)\nNone"})
			if last.StdoutSpillName != fmt.Sprintf("cell_%06d_stdout.txt", i) {
				t.Fatalf("cell %d: spill %q, warning %q", i, last.StdoutSpillName, last.Warning)
			}
			assertResultBounded(t, last, maxOutput, maxErrorText)
		}
	})
	t.Log("last " + assertResultBounded(t, last, maxOutput, maxErrorText))
	entries, err := os.ReadDir(filepath.Join(pool.StateDirOf(p), "spill", last.Kernel.ID))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		names, total = append(names, e.Name()), total+info.Size()
	}
	t.Logf("spill dir after 25 cells: %d files, %d bytes", len(names), total)
	if total > 20_000_000 || len(names) != 10 || names[0] != "cell_000016_stdout.txt" || names[9] != "cell_000025_stdout.txt" {
		t.Fatalf("spill dir holds %v (%d bytes), want cells 16-25 within 20,000,000 bytes", names, total)
	}
}

// A cell floods its tool socket (64 connections, each an unterminated
// 4 MiB line): a few connections are served, the rest refused at once, the
// daemon's memory stays flat. A stub call whose line would pass the
// kernel's request budget (two other half lines hold it) raises the
// daemon's message as ToolError, and calls work again once it is free.
func TestHostileRPCFlood(t *testing.T) {
	p := newTestPool(t, func(c *pool.Config) { c.Tools = rpcsock.Factory{} })
	handler := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		return fmt.Sprintf("ok %d", len(c.Args)), nil
	})
	var flood *pool.Result
	underAttack(t, p, func() {
		// 256 MiB pushed at the socket: minutes in a TCG guest (it ran
		// past the 60 s default there), so the cell gets the tests' patience.
		flood = run(t, p, pool.Request{Owner: "a", Tools: []string{"search"}, ToolHandler: handler, Timeout: testenv.Patience, Code: `import socket, threading, _kernpool_runtime as rt
outcomes = []
lock = threading.Lock()
barrier = threading.Barrier(64)
def flood():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    try:
        s.connect(rt.rpc_endpoint)
        s.sendall(b'{"tool":"search","args":{"q":"' + b"x" * (4 << 20))
    except OSError:
        pass
    barrier.wait()
    # A refused or dropped connection has its message queued by now or
    # shortly after; a served one never gets an answer (its line is
    # unterminated), so it waits out the timeout.
    s.settimeout(3)
    try:
        said = s.recv(4096)
    except OSError:
        said = b""
    s.close()
    kind = "refused" if b"refused" in said else "budget" if b"budget" in said else "served"
    with lock:
        outcomes.append(kind)
ts = [threading.Thread(target=flood) for _ in range(64)]
[t.start() for t in ts]; [t.join() for t in ts]
print(len(outcomes), outcomes.count("refused"), outcomes.count("budget"), outcomes.count("served"))`})
	})
	wantStatus(t, flood, pool.StatusSuccess)
	var n, refused, budget, served int
	if _, err := fmt.Sscan(flood.Output, &n, &refused, &budget, &served); err != nil || n != 64 || served > 4 || refused+budget != n-served || refused < 48 {
		t.Fatalf("flood outcomes %q: want 64 connections, at most 4 served, the rest refused or dropped", flood.Output)
	}
	t.Logf("flood: %d refused at once, %d dropped over the budget, %d served", refused, budget, served)
	res := run(t, p, pool.Request{Owner: "a", Tools: []string{"search"}, ToolHandler: handler, Code: `import socket, time, kernpool_tools, _kernpool_runtime as rt
held = []
for _ in range(2):  # two half lines of 600 kB hold the 2 MiB budget
    a = socket.socket(socket.AF_UNIX)
    a.connect(rt.rpc_endpoint)
    a.sendall(b'{"tool":"search","args":{"q":"' + b"x" * 600_000)
    held.append(a)
time.sleep(0.5)
try:
    kernpool_tools.search(q="y" * 700_000)
    print("no error")
except kernpool_tools.ToolError as e:
    print("ToolError:", e)
[a.close() for a in held]
time.sleep(0.2)
print(kernpool_tools.search(q="small"))`})
	want := "ToolError: Tool RPC connection dropped: this kernel's unfinished requests exceed its memory budget in the daemon\nok 13\n"
	if res.Output != want {
		t.Fatalf("output %q, want %q", res.Output, want)
	}
}

// A daemon's spills do not outlive it: a new pool on the same state dir
// removes what the previous one left under <state>/spill.
func TestSpillRootSweptAtStart(t *testing.T) {
	state := testTempDir(t)
	stale := filepath.Join(state, "spill", "kdeadbeefdeadbeef")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "cell_000001_stdout.txt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	newTestPool(t, func(c *pool.Config) { c.StateDir = state })
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a previous daemon's spill dir survived the start: %v", err)
	}
	assertOwner(t, filepath.Join(state, "spill"), os.Getuid(), os.Getgid(), fs.ModeDir|0o711)
}
