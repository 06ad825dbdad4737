//go:build integration && linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// nobody is the unprivileged uid the non-root daemon tests run as.
const nobody = 65534

// bareDirs is a private base dir with a state dir and socket path for a
// daemon the harness does not manage (one expected to refuse to start, or
// to run as another uid).
type bareDirs struct {
	base, state, socket, bin string
}

// newBareDirs makes the dirs, owned by uid, and a copy of the binary that
// uid may execute.
func newBareDirs(t *testing.T, uid int) bareDirs {
	t.Helper()
	base, err := os.MkdirTemp("", "kp-pol-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	own := filepath.Join(base, "own")
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, uid, uid); err != nil {
		t.Fatal(err)
	}
	b := bareDirs{base: base, state: filepath.Join(own, "state"), socket: filepath.Join(own, "kp.sock"), bin: filepath.Join(base, "kernpool")}
	src, err := os.ReadFile(kernpoolBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

// serveCmd is `kernpool serve` on b's dirs, as cred (nil: root); its
// output goes to the file the returned func reads.
func (b bareDirs) serveCmd(t *testing.T, ctx context.Context, cred *syscall.Credential, args ...string) (*exec.Cmd, func() string) {
	t.Helper()
	full := append([]string{"serve", "--state-dir", b.state, "--socket", b.socket, "--interpreter", testenv.Python}, args...)
	cmd := exec.CommandContext(ctx, b.bin, full...)
	cmd.Env = baseEnv()
	logPath := filepath.Join(b.base, "serve.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Credential: cred}
	return cmd, func() string { b, _ := os.ReadFile(logPath); return string(b) }
}

// refused runs serve and requires it to exit non-zero before it ever
// listened, with every want in its output.
func (b bareDirs) refused(t *testing.T, cred *syscall.Credential, wants []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scaled(30*time.Second))
	defer cancel()
	cmd, output := b.serveCmd(t, ctx, cred, args...)
	err := cmd.Run()
	out := output()
	if ctx.Err() != nil {
		t.Fatalf("serve did not exit (it served); output:\n%s", out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("serve exited with %v, want a non-zero exit; output:\n%s", err, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("refusal does not mention %q:\n%s", w, out)
		}
	}
	if _, err := os.Lstat(b.socket); !os.IsNotExist(err) {
		t.Errorf("a refused daemon created its socket (%v)", err)
	}
	return out
}

// The fail-open case: a root daemon asked for --memory-max 64MiB on
// a cgroup parent another live daemon holds used to serve without limits.
// It must refuse, naming that daemon's state dir and the fix, and leave the
// first daemon's kernels alone.
func TestTakenParentRefusesStart(t *testing.T) {
	requireDaemon(t)
	a := StartDaemon(t, Opts{})
	a.Run(t, "alice", "x = 1")
	parent := "kernpool-it-" + filepath.Base(a.Base)
	b := newBareDirs(t, 0)
	b.refused(t, nil, []string{a.State, "--cgroup-parent", "--isolation=process", "memory"},
		"--cgroup-parent", parent, "--memory-max", "64MiB")
	if r := a.Run(t, "alice", "print(x)"); strings.TrimSpace(r.Output) != "1" {
		t.Errorf("the first daemon's kernel lost its state: %+v", r)
	}
}

// A configured limit that cannot be applied (here: cgroups disabled while
// the default profile caps memory) refuses the start, naming the limits.
func TestUnapplicableLimitRefusesStart(t *testing.T) {
	requireDaemon(t)
	b := newBareDirs(t, 0)
	cfg := filepath.Join(b.base, "nocg.hcl")
	if err := os.WriteFile(cfg, []byte("cgroup {\n  enabled = false\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.refused(t, nil, []string{"memory, pids and cpu limits", "disabled by configuration", "enable cgroups", "--isolation=process"},
		"--config", cfg, "--memory-max", "64MiB")
}

// A non-root daemon would run every owner's kernel as its own uid: without
// --isolation=process it refuses, saying why and what to do.
func TestNonRootDaemonRefusesWithoutProcessIsolation(t *testing.T) {
	requireDaemon(t)
	b := newBareDirs(t, nobody)
	b.refused(t, &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
		[]string{"not root", "read each other's files", "run the daemon as root", "--isolation=process"})
}

// --isolation=process starts as non-root, says in plain words what it
// allows, runs kernels as the daemon's uid, and the daemon is non-dumpable:
// a kernel cannot read the daemon's environment through /proc.
func TestProcessIsolationSaysWhatItAllowsAndIsNonDumpable(t *testing.T) {
	requireDaemon(t)
	b := newBareDirs(t, nobody)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd, output := b.serveCmd(t, ctx, &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}, "--isolation=process")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	api := newAPI(b.socket)
	waitHealthy(t, api, cmd, output)
	for _, w := range []string{"kernels are NOT sandboxed", "own uid 65534", "read and change each other's files", "signal and kill each other", "non-dumpable"} {
		if !strings.Contains(output(), w) {
			t.Errorf("the process-mode warning does not say %q:\n%s", w, output())
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "environ"), &st); err != nil || st.Uid != 0 {
		t.Errorf("/proc/<daemon>/environ owner uid %d (%v), want 0: the daemon is dumpable", st.Uid, err)
	}
	res, err := api.Execute(ctx, ExecReq{Owner: "mallory", Code: "import os\nprint(os.getuid())\nopen('/proc/%d/environ' % os.getppid()).read()"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "error" || !strings.Contains(res.Output, "PermissionError") || !strings.HasPrefix(res.Output, "65534") {
		t.Errorf("a same-uid kernel read the daemon's environment: %+v", res)
	}
	if is := res.Kernel.Isolation; is == nil || is.Mode != "process" || is.UID != nobody {
		t.Errorf("isolation = %+v, want mode process, uid %d", is, nobody)
	}
}

func waitHealthy(t *testing.T, api *API, cmd *exec.Cmd, output func() string) {
	t.Helper()
	deadline := time.Now().Add(scaled(testenv.Patience))
	for {
		if _, err := api.Health(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) || !pidAlive(cmd.Process.Pid) {
			t.Fatalf("serve did not come up; output:\n%s", output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The parent of a daemon that died (SIGKILL: no cleanup, its kernel groups
// left behind) is stale: another daemon, with its own state dir, given that
// parent adopts it, sweeps the dead daemon's kernel groups, and serves.
func TestStaleParentOfADeadDaemonIsAdopted(t *testing.T) {
	requireDaemon(t)
	a := StartDaemon(t, Opts{})
	ids := map[string]bool{}
	for _, owner := range []string{"alice", "bob"} {
		ids[a.Run(t, owner, "x = 1").Kernel.ID] = true
	}
	a.mu.Lock()
	a.stopped = true // the SIGKILL is the test
	a.mu.Unlock()
	a.Signal(syscall.SIGKILL)
	if !a.Wait(scaled(10 * time.Second)) {
		t.Fatal("daemon did not die")
	}
	if len(findCgroups(ids)) == 0 {
		t.Fatal("the dead daemon left no kernel groups: nothing to adopt")
	}
	b := StartDaemon(t, Opts{Args: []string{"--cgroup-parent", "kernpool-it-" + filepath.Base(a.Base)}})
	if left := findCgroups(ids); len(left) != 0 {
		t.Errorf("the adopting daemon left the dead one's kernel groups: %v", left)
	}
	log, _ := os.ReadFile(b.Log)
	if !strings.Contains(string(log), "adopted a stale pool parent") || !strings.Contains(string(log), a.State) {
		t.Errorf("the adoption is not logged with the dead daemon's state dir:\n%s", log)
	}
	if r := b.Run(t, "carol", "print(2)"); strings.TrimSpace(r.Output) != "2" || r.Kernel.Isolation == nil || r.Kernel.Isolation.MemoryMax == 0 {
		t.Errorf("the adopting daemon does not serve with limits: %+v", r)
	}
}
