package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// TestInitFailsClosed: an init that cannot apply a namespace or the
// seccomp filter reports it and nothing runs; a binary that is no init
// fails the probe too.
func TestInitFailsClosed(t *testing.T) {
	testenv.RequireRoot(t)
	progs, err := compileSeccomp()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		path  string
		flags uintptr
		progs [][]byte
		want  string
	}{
		{"all in force", DefaultInitPath, initFlags(false), progs, ""},
		{"no network namespace", DefaultInitPath, initNamespaces, progs, "not in a net namespace of its own"},
		{"no pid namespace", DefaultInitPath, initFlags(false) &^ syscall.CLONE_NEWPID, progs, "not in a pid namespace of its own"},
		{"no ipc namespace", DefaultInitPath, initFlags(false) &^ syscall.CLONE_NEWIPC, progs, "not in a ipc namespace of its own"},
		{"no seccomp filter", DefaultInitPath, initFlags(false), nil, "seccomp: no filter to load"},
		{"not an init", "/bin/true", initFlags(false), progs, "no report from the init"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := probe(context.Background(), c.path, c.flags, c.progs)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("probe: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("probe = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestKernelStartFailsClosed: when a kernel's init cannot confine it,
// kernel.Start fails, and nothing of the kernel is left (staging dir, uid).
func TestKernelStartFailsClosed(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	cases := []struct {
		name string
		edit func(*Isolator)
		want string
	}{
		// EOF: the daemon's copy of the status pipe's write end is closed,
		// so an init that dies silently is seen at once, not at the timeout.
		{"init binary gives no report", func(i *Isolator) { i.initPath = "/bin/true" }, "no report from the init (EOF)"},
		{"no seccomp filter to load", func(i *Isolator) { i.seccomp = nil }, "seccomp: no filter to load"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iso := newIso(t, func(cfg *Config) { cfg.PerOwnerUID = false })
			c.edit(iso)
			id := kernelID(t)
			sb, err := iso.reserve(id, "alice", "default", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			uid := sb.UID()
			k, err := kernel.Start(context.Background(), kernel.Spec{
				ID: id, Interpreter: testenv.Python, StateDir: iso.cfg.StateDir,
				Env: []string{"PATH=/usr/bin:/bin"}, Sandbox: sb,
			})
			if err == nil {
				_ = k.Kill()
				t.Fatal("kernel.Start succeeded without its confinement")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("kernel.Start: %v, want it to say %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(iso.cfg.StateDir, "kernels", id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("staging dir left behind: %v", err)
			}
			if n := iso.uids.inUse(); uid >= 0 && n != 0 {
				t.Errorf("%d uid(s) still leased after the failed start of uid %d", n, uid)
			}
		})
	}
}

// TestInterpreterStatusThroughInit: the kernel's death is the
// interpreter's, as its init saw it, not the init's own exit status,
// under the reaper and under the Go supervisor alike.
func TestInterpreterStatusThroughInit(t *testing.T) {
	cases := []struct {
		name, code string
		exit       int
		signal     string
	}{
		{"exit code", "import os\nos._exit(7)", 7, ""},
		{"killed by a signal", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", -1, "SIGKILL"},
	}
	for _, sup := range supervisors {
		t.Run(sup.name, func(t *testing.T) {
			iso := supervisedIso(t, sup.noReaper)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					k, sb := startKernel(t, iso, "alice", "default", Limits{})
					if got := sb.Supervisor(); got != sup.name {
						t.Fatalf("supervisor %q, want %q", got, sup.name)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_, _ = k.Exec(ctx, kernel.Cell{Code: c.code})
					<-k.Done()
					var d *kernel.DeathError
					if !errors.As(k.Err(), &d) || d.ExitCode != c.exit || d.Signal != c.signal {
						t.Fatalf("kernel died with %v (%+v), want exit %d signal %q", k.Err(), d, c.exit, c.signal)
					}
				})
			}
		})
	}
}

// TestIsolationFromInit: a started kernel's Isolation() carries what its
// init reported in force: every namespace, net only without the host
// network, and the seccomp filter.
func TestIsolationFromInit(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	iso := newIso(t, func(c *Config) { c.Profiles["hostnet"] = Profile{Network: true} })
	cases := []struct {
		mode, ns string
		network  bool
	}{
		{"default", "ipc,mnt,net,pid,uts", false},
		{"hostnet", "ipc,mnt,pid,uts", true},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			k, sb := startKernel(t, iso, "alice", c.mode, Limits{})
			run(t, k, "x = 1")
			is := sb.Isolation()
			if got := strings.Join(is.Namespaces, ","); got != c.ns || !is.Seccomp || is.Network != c.network {
				t.Fatalf("isolation = %+v, want namespaces %s, seccomp, network %v", is, c.ns, c.network)
			}
			if got := strings.Join(sb.Namespaces(), ","); !strings.Contains(got, "mnt") {
				t.Fatalf("the init reported namespaces %q", got)
			}
		})
	}
}

// TestCwdUnderTmpStaysVisible: a cwd under /tmp (outside the state dir) is
// bound back into the kernel's private /tmp; the rest of the host's /tmp
// is not there.
func TestCwdUnderTmpStaysVisible(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	cwd := stateDir(t) // 0711 up to /tmp
	if err := os.WriteFile(filepath.Join(cwd, "data.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	id := kernelID(t)
	sb, err := iso.reserve(id, "alice", "default", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Start(context.Background(), kernel.Spec{
		ID: id, Interpreter: testenv.Python, StateDir: iso.cfg.StateDir, Cwd: cwd,
		Env: []string{"PATH=/usr/bin:/bin"}, Sandbox: sb,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Kill() })
	host, err := os.ReadDir("/tmp")
	if err != nil || len(host) < 3 {
		t.Skipf("the host's /tmp has %d entries: too few to tell it from a private one", len(host))
	}
	r := run(t, k, "import os\nprint(os.getcwd(), open('data.txt').read(), len(os.listdir('/tmp')))")
	want := fmt.Sprintf("%s hi %d", cwd, 2) // the state dir's and the cwd's top dirs
	if strings.Split(cwd, "/")[2] == strings.Split(iso.cfg.StateDir, "/")[2] {
		want = fmt.Sprintf("%s hi %d", cwd, 1)
	}
	if got := strings.TrimSpace(r.Stdout); got != want {
		t.Fatalf("kernel sees %q, want %q", got, want)
	}
}
