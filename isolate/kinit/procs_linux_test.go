package kinit

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestOwnNamespaces compares this process with a peer started in new ipc
// and uts namespaces: those two, and only those, are reported as its own
// (the init's view is the mirror image: the peer is the daemon).
func TestOwnNamespaces(t *testing.T) {
	testenv.RequireRoot(t)
	if own, err := ownNamespaces(os.Getpid()); err != nil || len(own) != 0 {
		t.Fatalf("ownNamespaces(self) = %q, %v; want none", own, err)
	}
	for _, peer := range []int{0, -1} {
		if _, err := ownNamespaces(peer); err == nil || !strings.Contains(err.Error(), "no daemon pid") {
			t.Fatalf("ownNamespaces(%d) = %v, want a no daemon pid error", peer, err)
		}
	}
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	own, err := ownNamespaces(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ipc", "uts"}; !slices.Equal(own, want) {
		t.Fatalf("ownNamespaces(peer in new ipc, uts) = %q, want %q", own, want)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := ownNamespaces(cmd.Process.Pid); err == nil || !strings.Contains(err.Error(), "read daemon namespace mnt") {
		t.Fatalf("ownNamespaces(ended peer) = %v, want a read daemon namespace error", err)
	}
}

// forked runs forkInterpreter on a shell that records its ids, process
// group and environment in dir, and waits for it.
func forked(t *testing.T, cfg Config, dir string) (ids, env []string) {
	t.Helper()
	cfg.Path, cfg.Dir = "/bin/sh", dir
	cfg.Args = []string{"sh", "-c", `echo "$(id -u) $(id -g) $(id -G) $(ps -o pgid= -p $$ | tr -d ' ') $$" > ids; env > env`}
	pid, err := forkInterpreter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("interpreter ended with %v", ws)
	}
	read := func(name string) []string {
		b, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(dir + "/" + name)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	ids = strings.Fields(read("ids")[0])
	if len(ids) < 4 || ids[len(ids)-1] != ids[len(ids)-2] || ids[len(ids)-1] != strconv.Itoa(pid) {
		t.Fatalf("ids %q of pid %d: want the interpreter leading its own process group", ids, pid)
	}
	return ids[:len(ids)-2], read("env")
}

func envValues(env []string, name string) []string {
	var vs []string
	for _, kv := range env {
		if n, v, _ := strings.Cut(kv, "="); n == name {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestForkInterpreter: the interpreter runs with the kernel's uid and gid
// and no supplementary group, in its own process group, without the init's
// config, with the kill file's in-namespace path, and under MemoryMerge
// with the profile's hash seed in place of any other.
func TestForkInterpreter(t *testing.T) {
	testenv.RequireRoot(t)
	// The kernel uid must reach it: not under t.TempDir's 0700 parent.
	dir, err := os.MkdirTemp("", "kinit-fork")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvConfig, `{"path":"/x"}`)
	t.Setenv(EnvSeccomp, "AAAA")
	t.Setenv("PYTHONHASHSEED", "7")
	t.Setenv("KERNPOOL_KILL_FILE", "/sys/fs/cgroup/kernpool/k9/cgroup.kill")
	t.Setenv("OTHER_PATH", "/sys/fs/cgroup/kernpool/k9/cgroup.kill/x")

	ids, env := forked(t, Config{UID: 60001, GID: 60002, hostKillFile: "/sys/fs/cgroup/kernpool/k9/cgroup.kill", KillFile: "/sys/fs/cgroup/cgroup.kill"}, dir)
	if want := []string{"60001", "60002", "60002"}; !slices.Equal(ids, want) {
		t.Errorf("uid gid groups = %q, want %q", ids, want)
	}
	for name, want := range map[string][]string{
		EnvConfig: nil, EnvSeccomp: nil, "PYTHONHASHSEED": {"7"},
		"KERNPOOL_KILL_FILE": {"/sys/fs/cgroup/cgroup.kill"},
		"OTHER_PATH":         {"/sys/fs/cgroup/kernpool/k9/cgroup.kill/x"},
	} {
		if got := envValues(env, name); !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}

	// Root's uid with another gid still drops to that gid.
	ids, env = forked(t, Config{UID: 0, GID: 60003, MemoryMerge: true, HashSeed: 4242}, dir)
	if want := []string{"0", "60003", "60003"}; !slices.Equal(ids, want) {
		t.Errorf("uid 0 gid 60003: uid gid groups = %q, want %q", ids, want)
	}
	if got := envValues(env, "PYTHONHASHSEED"); !slices.Equal(got, []string{"4242"}) {
		t.Errorf("PYTHONHASHSEED under MemoryMerge = %q, want [4242]", got)
	}
	if got := envValues(env, "KERNPOOL_KILL_FILE"); !slices.Equal(got, []string{"/sys/fs/cgroup/kernpool/k9/cgroup.kill"}) {
		t.Errorf("KERNPOOL_KILL_FILE with no kill file mapped = %q, want it unchanged", got)
	}

	// UID -1 keeps the init's credentials (root here).
	ids, _ = forked(t, Config{UID: -1, GID: -1}, dir)
	if ids[0] != "0" || ids[1] != "0" {
		t.Errorf("UID -1: uid gid groups = %q, want root's", ids)
	}

	if _, err := forkInterpreter(Config{Path: dir + "/none", Args: []string{"none"}, UID: -1}); err == nil || !strings.Contains(err.Error(), "start "+dir+"/none") {
		t.Fatalf("forkInterpreter of a missing binary: %v", err)
	}
}

// envSupervise makes this test binary fork `sh -c <value>` and run the Go
// supervisor over it, status lines on stdout (TestSuperviseHelper).
const envSupervise = "KINIT_TEST_SUPERVISE"

// TestSuperviseHelper is the init stand-in of TestSupervise (a child
// process: supervise reaps every child and keeps forwarding signals).
func TestSuperviseHelper(t *testing.T) {
	script, ok := os.LookupEnv(envSupervise)
	if !ok {
		return
	}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	os.Exit(supervise(pid, os.Stdout, func() {}, "ready\n"))
}

// TestSupervise: the Go supervisor reports how the interpreter ended
// after its ready line, and exits as a shell does: the exit code, or 128
// plus the signal's number.
func TestSupervise(t *testing.T) {
	cases := []struct {
		script, status string
		exit           int
	}{
		{"exit 7", "ready\nexit 7\n", 7},
		{"kill -9 $$", "ready\nsignal 9\n", 137},
		{"kill -15 $$", "ready\nsignal 15\n", 143},
	}
	for _, c := range cases {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSuperviseHelper$")
		cmd.Env = append(os.Environ(), envSupervise+"="+c.script)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.exit || string(out) != c.status {
			t.Errorf("%q: exit %v, status %q; want exit %d, status %q", c.script, err, out, c.exit, c.status)
		}
	}
}
