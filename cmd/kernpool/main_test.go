//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/pool/api"
)

// binPath is the kernpool binary the CLI tests run: this test binary
// itself, which runs main() when cliEnv is set (the helper-process
// trick). So the CLI under test is compiled with the tests' own build
// flags: -race, -cover and the mutation check's -overlay reach it, which
// a separately built binary would miss. Set before any test runs.
var binPath string

// cliEnv makes this test binary run main() instead of the tests. Kernels
// never see it (envscrub reserves the KERNPOOL_ prefix).
const cliEnv = "KERNPOOL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		main() // exits; its first call is kinit.Main, for a kernel's init step
	}
	kinit.Main()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binPath = exe
	// Every child (cli, startServe, exec.Command(binPath, ...)) inherits it.
	if err := os.Setenv(cliEnv, "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m)
}

// testDaemon is a real `kernpool serve` child process.
type testDaemon struct {
	cmd    *exec.Cmd
	socket string
	state  string
	logs   *testenv.SyncBuffer
	exited chan error
}

// startServe runs `kernpool serve` on a fresh socket and state dir and
// waits until it answers /v1/health. Cleanup SIGTERMs it (then SIGKILLs
// it if it hangs) and fails the test if it could not stop cleanly.
func startServe(t *testing.T, extra ...string) *testDaemon {
	t.Helper()
	testenv.RequirePython(t)
	dir, err := os.MkdirTemp("", "kpd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Kernels run as unprivileged uids when the test runs as root: they
	// must traverse the test dir to their staging dirs.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{socket: filepath.Join(dir, "run", "kp.sock"), state: filepath.Join(dir, "state"),
		logs: &testenv.SyncBuffer{}, exited: make(chan error, 1)}
	args := append([]string{"serve", "--config", privateCgroupConfig(t, dir), "--socket", d.socket, "--state-dir", d.state,
		"--interpreter", testenv.Python, "--log-level", "debug"}, extra...)
	if os.Geteuid() != 0 {
		// Not root, serve refuses to sandbox (no uid per kernel); these
		// tests are about the CLI, so they accept the explicit process mode.
		args = append(args, "--isolation=process")
	}
	return runServe(t, d, nil, args)
}

// runServe starts d's `kernpool serve` with args (env added to the test's
// own) and waits until it answers /v1/health on d.socket.
func runServe(t *testing.T, d *testDaemon, env, args []string) *testDaemon {
	t.Helper()
	d.cmd = exec.Command(binPath, args...)
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop(t) })
	client := api.NewClient(d.socket)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(testenv.Patience)
	for {
		if _, err := client.Health(context.Background()); err == nil {
			return d
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			t.Fatalf("kernpool serve exited early: %v\n%s", err, d.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernpool serve did not answer on %s\n%s", d.socket, d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// privateCgroupConfig writes a config file into dir giving the daemon a
// cgroup parent of its own: a daemon sweeps its parent's leftovers at
// start, which must never reach another daemon's kernels on this host.
func privateCgroupConfig(t *testing.T, dir string) string {
	t.Helper()
	conf := filepath.Join(dir, "kernpool.hcl")
	src := fmt.Sprintf("cgroup {\n  parent = \"kernpool-clitest-%d-%s\"\n}\n", os.Getpid(), filepath.Base(dir))
	if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// stop SIGTERMs the daemon and waits; idempotent.
func (d *testDaemon) stop(t *testing.T) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		d.exited <- err
	case <-time.After(testenv.Patience):
		_ = d.cmd.Process.Kill()
		d.exited <- <-d.exited
		t.Errorf("kernpool serve ignored SIGTERM\n%s", d.logs)
	}
}

// wait returns the daemon's exit error once it exited.
func (d *testDaemon) wait() error {
	err := <-d.exited
	d.exited <- err
	return err
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the kernpool binary with args (stdin from in) and returns its
// output and exit code.
func cli(t *testing.T, in string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(in), &out, &errb
	cmd.Env = append(os.Environ(), "KERNPOOL_SOCKET=") // never reach a real daemon by default
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("run kernpool %q: %v", args, err)
	}
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

// pidGone reports whether no process has pid.
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// logText returns the daemon's log so far.
func (d *testDaemon) logText() string { return d.logs.String() }
