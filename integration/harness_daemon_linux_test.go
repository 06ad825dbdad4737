//go:build integration && linux

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// Opts configure one test daemon. Zero values mean kernpool's defaults.
type Opts struct {
	// MemoryMax, PidsMax and CPUMax become serve's --memory-max, --pids-max, --cpu-max.
	MemoryMax string
	PidsMax   int
	CPUMax    string
	// MaxKernels is the live-kernel cap (config max_kernels).
	MaxKernels int
	// IdleTimeout reaps idle kernels (config idle_timeout), e.g. "2s".
	IdleTimeout string
	// Passthrough becomes serve's --passthrough.
	Passthrough []string
	// Env is added to the daemon's environment (e.g. canary secrets).
	Env []string
	// Config is extra HCL appended to the generated config file.
	Config string
	// ConfigFile, when set, is served instead of the generated config.
	ConfigFile string
	// Args are extra serve flags.
	Args []string
	// Spares becomes serve's --spares (warm spares of the default
	// profile). Unlike kernpool's default of 2, the harness's zero value
	// is none: AssertClean counts every kernel of a running daemon, and
	// spares stay resident by design (spares_linux_test.go has them).
	Spares int
}

// Daemon is one running `kernpool serve` with a private state dir and socket.
type Daemon struct {
	t      *testing.T
	Base   string // private dir (0711) holding everything below
	State  string // --state-dir
	Socket string // --socket
	Log    string // the daemon's stderr
	cmd    *exec.Cmd
	done   chan struct{}
	api    *API

	mu      sync.Mutex
	ids     map[string]bool // every kernel id this daemon was seen to use
	uids    map[int]bool    // every kernel uid seen (other than 0 / our own)
	baseFDs []string        // the daemon's fds after start-up
	waitErr error
	stopped bool
}

// StartDaemon starts a daemon, waits until /v1/health answers, records the
// fd baseline, and registers cleanup: stop it and fail on any leak.
func StartDaemon(t *testing.T, o Opts) *Daemon {
	t.Helper()
	base, err := os.MkdirTemp("", "kp-it-")
	if err != nil {
		t.Fatal(err)
	}
	// Kernels run as other uids and must traverse into their staging dirs.
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{t: t, Base: base, State: filepath.Join(base, "state"), Socket: filepath.Join(base, "run", "kp.sock"),
		Log: filepath.Join(base, "daemon.log"), ids: map[string]bool{}, uids: map[int]bool{}}
	d.api = newAPI(d.Socket)
	t.Cleanup(func() { d.cleanup() })
	d.start(o)
	return d
}

func (d *Daemon) writeConfig(o Opts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "interpreter = %q\nlog_level = \"debug\"\n", testenv.Python)
	// A private cgroup parent (the default is derived from the state dir,
	// which is private too; a name keeps it recognisable in /sys/fs/cgroup).
	fmt.Fprintf(&b, "cgroup {\n  parent = %q\n}\n", "kernpool-it-"+filepath.Base(d.Base))
	if o.MaxKernels > 0 {
		fmt.Fprintf(&b, "max_kernels = %d\n", o.MaxKernels)
	}
	if o.IdleTimeout != "" {
		fmt.Fprintf(&b, "idle_timeout = %q\n", o.IdleTimeout)
	}
	b.WriteString(o.Config)
	path := filepath.Join(d.Base, "kernpool.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		d.t.Fatal(err)
	}
	return path
}

// start launches `kernpool serve` (used again by Restart).
func (d *Daemon) start(o Opts) {
	t := d.t
	t.Helper()
	config := o.ConfigFile
	if config == "" {
		config = d.writeConfig(o)
	}
	args := append([]string{"serve", "--socket", d.Socket, "--state-dir", d.State, "--config", config}, o.Args...)
	if o.MemoryMax != "" {
		args = append(args, "--memory-max", o.MemoryMax)
	}
	if o.PidsMax > 0 {
		args = append(args, "--pids-max", fmt.Sprint(o.PidsMax))
	}
	if o.CPUMax != "" {
		args = append(args, "--cpu-max", o.CPUMax)
	}
	if len(o.Passthrough) > 0 {
		args = append(args, "--passthrough", strings.Join(o.Passthrough, ","))
	}
	args = append(args, "--spares", fmt.Sprint(o.Spares))
	logf, err := os.OpenFile(d.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(kernpoolBin, args...)
	cmd.Env = append(baseEnv(), o.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If this test binary dies, the daemon (and through it its kernels)
	// follows. Its own process group, as under a service manager, keeps a
	// hostile cell's killpg of the daemon's group away from the test runner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", kernpoolBin, err)
	}
	d.mu.Lock()
	d.cmd, d.done, d.stopped, d.waitErr = cmd, make(chan struct{}), false, nil
	d.mu.Unlock()
	go func(done chan struct{}) {
		err := cmd.Wait()
		d.mu.Lock()
		d.waitErr = err
		d.mu.Unlock()
		close(done)
	}(d.done)
	deadline := time.Now().Add(scaled(testenv.Patience))
	for {
		if _, err := d.api.Health(context.Background()); err == nil {
			break
		}
		select {
		case <-d.done:
			t.Fatalf("kernpool serve exited during start-up (%v); log:\n%s", d.waitErr, d.LogTail(40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernpool serve did not answer /v1/health within 15 s; log:\n%s", d.LogTail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.baseFDs = listFDs(cmd.Process.Pid)
}

// baseEnv is the daemon's environment: what a service manager would give it.
func baseEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "USER=root"}
}

// Pid is the daemon's pid (0 once it exited).
func (d *Daemon) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	// done closes after Wait returned; ProcessState is Wait's to write.
	select {
	case <-d.done:
		return 0
	default:
	}
	return d.cmd.Process.Pid
}

// Alive reports whether the daemon process still runs.
func (d *Daemon) Alive() bool { return d.Pid() != 0 }

// API is the daemon's HTTP client.
func (d *Daemon) API() *API { return d.api }

// Signal sends sig to the daemon (our own child; never a group).
func (d *Daemon) Signal(sig syscall.Signal) {
	if pid := d.Pid(); pid != 0 {
		_ = syscall.Kill(pid, sig)
	}
}

// Wait waits up to timeout for the daemon to exit; reports whether it did.
func (d *Daemon) Wait(timeout time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop ends the daemon: SIGTERM, then SIGKILL after a grace period. Idempotent.
func (d *Daemon) Stop() {
	d.mu.Lock()
	if d.stopped || d.cmd == nil {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	d.mu.Unlock()
	d.Signal(syscall.SIGTERM)
	if !d.Wait(scaled(15 * time.Second)) {
		d.t.Errorf("kernpool serve ignored SIGTERM for 15 s; killing it")
		d.Signal(syscall.SIGKILL)
		d.Wait(5 * time.Second)
	}
}

// Restart starts a new daemon on the same state dir and socket (after a crash).
func (d *Daemon) Restart(o Opts) {
	d.t.Helper()
	d.Wait(5 * time.Second)
	d.start(o)
}

// cleanup stops the daemon, checks for leaks, kills and removes whatever
// of ours is left, and removes the base dir.
func (d *Daemon) cleanup() {
	d.Stop()
	d.noteIDsFromLog()
	if l := d.waitLeaks(false); !l.Empty() {
		d.t.Errorf("after the daemon stopped, this was left behind:\n%s", l)
		d.killLeaks(l)
	}
	if d.t.Failed() {
		d.t.Logf("daemon log tail (%s):\n%s", d.Log, d.LogTail(60))
	}
	for _, m := range mountsBelow(d.State) { // a killed daemon's staging mounts
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	_ = os.RemoveAll(d.Base)
}

// LogTail returns the last n lines of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	b, _ := os.ReadFile(d.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CLI runs `kernpool SUB --socket S ARGS...` with stdin and returns its
// stdout, stderr and exit code.
func (d *Daemon) CLI(ctx context.Context, stdin string, sub string, args ...string) (string, string, int) {
	full := append([]string{sub, "--socket", d.Socket}, args...)
	cmd := exec.CommandContext(ctx, kernpoolBin, full...)
	cmd.Env = baseEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return out.String(), errb.String(), code
}

// scaled stretches a wait under emulation (the VM runs under TCG).
func scaled(d time.Duration) time.Duration {
	if os.Getenv("KERNPOOL_IN_VM") == "1" {
		return 4 * d
	}
	return d
}
