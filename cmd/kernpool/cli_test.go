//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

func TestExecKeepsState(t *testing.T) {
	d := startServe(t)
	if r := cli(t, "", "exec", "--socket", d.socket, "x=1"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("x=1: %+v", r)
	}
	if r := cli(t, "", "exec", "--socket", d.socket, "print(x)"); r.code != 0 || r.stdout != "1\n" || r.stderr != "" {
		t.Fatalf("print(x): %+v", r)
	}
	// Code from stdin, with "-" and with no argument.
	if r := cli(t, "print(x + 1)\n", "exec", "--socket", d.socket, "-"); r.code != 0 || r.stdout != "2\n" {
		t.Fatalf("stdin with -: %+v", r)
	}
	if r := cli(t, "print(x + 2)\n", "exec", "--socket", d.socket); r.code != 0 || r.stdout != "3\n" {
		t.Fatalf("stdin without CODE: %+v", r)
	}
}

func TestExecExitCodes(t *testing.T) {
	d := startServe(t)
	absent := d.socket + ".absent"
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"success", []string{"exec", "--socket", d.socket, "print('ok')"}, 0, "ok", ""},
		{"cell error", []string{"exec", "--socket", d.socket, "1/0"}, 1, "", "ZeroDivisionError"},
		{"stdout and traceback apart", []string{"exec", "--socket", d.socket, "print('before'); 1/0"}, 1, "before\n", "ZeroDivisionError"},
		{"bad flag", []string{"exec", "--socket", d.socket, "--frobnicate", "1"}, 2, "", "frobnicate"},
		{"bad timeout flag", []string{"exec", "--socket", d.socket, "--timeout", "soon", "1"}, 2, "", "timeout"},
		{"two code args", []string{"exec", "--socket", d.socket, "1", "2"}, 2, "", "one CODE"},
		{"no daemon", []string{"exec", "--socket", absent, "1"}, 2, "", "not reachable"},
		{"bad request", []string{"exec", "--socket", d.socket, "--interpreter", "python3", "1"}, 2, "", "interpreter"},
		{"timeout", []string{"exec", "--socket", d.socket, "--owner", "slow", "--timeout", "1s", "import time; time.sleep(30)"}, 3, "timed out", ""},
		{"timeout in seconds", []string{"exec", "--socket", d.socket, "--owner", "slow2", "--timeout", "0.5", "import time; time.sleep(30)"}, 3, "timed out", ""},
		{"negative timeout", []string{"exec", "--socket", d.socket, "--timeout", "-1s", "1"}, 2, "", "negative"},
		{"killed kernel", []string{"exec", "--socket", d.socket, "--owner", "doomed", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"}, 3, "", ""},
		{"unknown command", []string{"frob"}, 2, "", "unknown command"},
		{"no command", []string{}, 2, "", "missing command"},
		{"help", []string{"exec", "-h"}, 0, "kernpool exec [CODE | -] [flags]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, "", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", r.code, tt.code, r.stdout, tt.stdout, r.stderr, tt.stderr)
			}
		})
	}
}

func TestExecJSON(t *testing.T) {
	d := startServe(t)
	r := cli(t, "", "exec", "--socket", d.socket, "--owner", "j", "--json", "print('hi')")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &fields); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"status", "output", "exit_code", "duration_seconds", "tool_calls_made", "kernel"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("--json lacks %q: %s", k, r.stdout)
		}
	}
	var res pool.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "success" || res.Output != "hi\n" || res.Kernel.ID == "" || res.Kernel.ExecutionCount != 1 {
		t.Fatalf("result %+v", res)
	}
	// --json on a failed cell still prints the object and keeps the exit code.
	r = cli(t, "", "exec", "--socket", d.socket, "--owner", "j", "--json", "raise ValueError('x')")
	if r.code != 1 || !strings.Contains(r.stdout, `"status": "error"`) {
		t.Fatalf("failed cell with --json: %+v", r)
	}
}

func TestPsShutdownKill(t *testing.T) {
	d := startServe(t, "--spares", "0") // owners' kernels only (TestPsListsSpares)
	for _, owner := range []string{"alice", "bob"} {
		if r := cli(t, "", "exec", "--socket", d.socket, "--owner", owner, "1"); r.code != 0 {
			t.Fatalf("exec %s: %+v", owner, r)
		}
	}
	r := cli(t, "", "ps", "--socket", d.socket)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("ps: %+v", r)
	}
	for _, col := range []string{"OWNER", "MODE", "PID", "IDLE", "EXEC", "BUSY"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("ps header %q lacks %s", lines[0], col)
		}
	}
	r = cli(t, "", "ps", "--socket", d.socket, "--json")
	var list api.KernelList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Kernels) != 2 {
		t.Fatalf("ps --json: %v\n%s", err, r.stdout)
	}
	byOwner := map[string]pool.KernelInfo{}
	for _, k := range list.Kernels {
		byOwner[k.Owner] = k
	}

	alice := byOwner["alice"]
	if r := cli(t, "", "kill", "--socket", d.socket, alice.ID); r.code != 0 || !strings.Contains(r.stdout, alice.ID) {
		t.Fatalf("kill: %+v", r)
	}
	if !pidGone(alice.Pid) {
		t.Errorf("killed kernel pid %d survives", alice.Pid)
	}
	if r := cli(t, "", "kill", "--socket", d.socket, alice.ID); r.code != 1 || !strings.Contains(r.stderr, "no live kernel") {
		t.Fatalf("second kill: %+v", r)
	}
	if r := cli(t, "", "kill", "--socket", d.socket); r.code != 2 {
		t.Fatalf("kill without id: %+v", r)
	}

	if r := cli(t, "", "shutdown", "--socket", d.socket); r.code != 2 || !strings.Contains(r.stderr, "--owner") {
		t.Fatalf("shutdown without owner: %+v", r)
	}
	if r := cli(t, "", "shutdown", "--socket", d.socket, "--owner", "bob"); r.code != 0 || !strings.Contains(r.stdout, "killed 1") {
		t.Fatalf("shutdown bob: %+v", r)
	}
	if !pidGone(byOwner["bob"].Pid) {
		t.Errorf("bob's kernel pid %d survives shutdown", byOwner["bob"].Pid)
	}
	if r := cli(t, "", "ps", "--socket", d.socket); len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 1 {
		t.Fatalf("ps after kill and shutdown: %+v", r)
	}
}

func TestToolHandler(t *testing.T) {
	d := startServe(t)
	code := `import kernpool_tools as t
r = t.echo(text="hi")
print(r["tool"], r["args"]["text"], r["id"] != "")
try:
    t.fail()
except t.ToolError as e:
    print("error:", e)
`
	// The handler echoes the call back (the stub decodes the JSON) or,
	// for "fail", exits non-zero with a message on stderr.
	handler := `c=$(cat); case "$c" in *'"tool":"fail"'*) echo "it broke" >&2; exit 3;; esac; printf '%s' "$c"`
	r := cli(t, "", "exec", "--socket", d.socket, "--tools", "echo,fail", "--tool-handler", handler, code)
	if r.code != 0 || !strings.Contains(r.stdout, "echo hi True\n") || !strings.Contains(r.stdout, "error: tool fail failed: it broke") {
		t.Fatalf("tool handler round trip: %+v", r)
	}
}

// A slow handler is waited for; one that never answers costs the cell a
// ToolError after the daemon's --tool-call-timeout, not a hang, and the
// kernel keeps working.
func TestToolHandlerSlowAndSilent(t *testing.T) {
	// The slow handler takes a fraction of the timeout, with a wide margin
	// for a loaded host; the silent one never answers.
	d := startServe(t, "--tool-call-timeout", "3s")
	handler := `c=$(cat); case "$c" in *'"tool":"slow"'*) sleep 0.2; printf slow-ok;; *) sleep 30;; esac`
	code := `import kernpool_tools as t
print(t.slow())
try:
    t.silent()
    print("silent answered")
except t.ToolError as e:
    print("error:", e)
print(t.slow())
`
	r := cli(t, "", "exec", "--socket", d.socket, "--tools", "slow,silent", "--tool-handler", handler, "--timeout", "60s", code)
	want := "slow-ok\nerror: Tool call silent timed out after 3s\nslow-ok\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("slow and silent handlers: %+v\nwant stdout %q", r, want)
	}
}

func TestServeDrainOnSigterm(t *testing.T) {
	// One cell finishes within the grace, one outlives it. The grace is
	// generous: a 1 s grace ran out before a running 0.3 s cell answered
	// on a host loaded by stress-ng.
	d := startServe(t, "--drain-grace", "10s")
	quick := make(chan cliResult, 1)
	slow := make(chan cliResult, 1)
	go func() {
		slow <- cli(t, "", "exec", "--socket", d.socket, "--owner", "slow", "import time; time.sleep(600)")
	}()
	var slowPid int
	waitUntil(t, "the slow cell", func() bool {
		r := cli(t, "", "ps", "--socket", d.socket, "--json")
		var list api.KernelList
		_ = json.Unmarshal([]byte(r.stdout), &list)
		for _, k := range list.Kernels {
			if k.Owner == "slow" && k.Busy {
				slowPid = k.Pid
				return true
			}
		}
		return false
	})
	go func() {
		quick <- cli(t, "", "exec", "--socket", d.socket, "--owner", "quick", "import time; time.sleep(2); print('done')")
	}()
	waitUntil(t, "the quick cell", func() bool {
		if len(quick) == 1 {
			return true // answered before the drain: nothing to wait for
		}
		r := cli(t, "", "ps", "--socket", d.socket, "--json")
		var list api.KernelList
		_ = json.Unmarshal([]byte(r.stdout), &list)
		for _, k := range list.Kernels {
			if k.Owner == "quick" && k.Busy {
				return true
			}
		}
		return false
	})
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM\n%s", err, d.logs)
	}
	if r := <-quick; r.code != 0 || r.stdout != "done\n" {
		t.Errorf("a cell within the grace did not finish: %+v", r)
	}
	if r := <-slow; r.code != 3 {
		t.Errorf("a cell past the grace: %+v, want exit 3", r)
	}
	if _, err := os.Lstat(d.socket); !os.IsNotExist(err) {
		t.Errorf("socket survives the drain: %v", err)
	}
	if !pidGone(slowPid) {
		t.Errorf("kernel pid %d survives the daemon", slowPid)
	}
	if entries, _ := os.ReadDir(d.state + "/kernels"); len(entries) != 0 {
		t.Errorf("staging dirs survive the daemon: %v", entries)
	}
}

func TestServeRefusesSecondDaemon(t *testing.T) {
	d := startServe(t)
	r := cli(t, "", "serve", "--socket", d.socket, "--state-dir", d.state+"2", "--interpreter", testenv.Python)
	if r.code == 0 || !strings.Contains(r.stderr, "another kernpool is serving") {
		t.Fatalf("second serve on the socket: %+v", r)
	}
	r = cli(t, "", "serve", "--socket", d.socket+"2", "--state-dir", d.state, "--interpreter", testenv.Python)
	if r.code == 0 || !strings.Contains(r.stderr, "state dir") {
		t.Fatalf("second serve on the state dir: %+v", r)
	}
	// The first daemon still serves.
	if r := cli(t, "", "exec", "--socket", d.socket, "print(1)"); r.code != 0 {
		t.Fatalf("first daemon disturbed: %+v", r)
	}
}

func TestServeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--memory-max", "lots"},
		{"serve", "--bogus"},
		{"serve", "extra-arg"},
		{"serve", "--config", "/nonexistent/kernpool.hcl"},
	} {
		if r := cli(t, "", args...); r.code != 2 || r.stderr == "" {
			t.Errorf("%q: %+v, want exit 2 with a message", args, r)
		}
	}
}

func TestDoctor(t *testing.T) {
	d := startServe(t)
	r := cli(t, "", "doctor", "--socket", d.socket, "--state-dir", d.state)
	for _, want := range []string{"socket:", d.socket, "uid:", "interpreter:  " + testenv.Python, "daemon:       ok"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
	// Without a daemon, doctor reports its own flags and resolves python3.
	d.stop(t)
	r = cli(t, "", "doctor", "--socket", d.socket, "--state-dir", d.state)
	if !strings.Contains(r.stdout, "interpreter:  resolves to /") || !strings.Contains(r.stdout, "no daemon answered") {
		t.Errorf("doctor without a daemon:\n%s", r.stdout)
	}
}

// TestDoctorReportsTheDaemonsSettings: with a daemon up, doctor prints the
// daemon's settings (from GET /v1/settings), not its own flag defaults,
// and counts the kernels it then lists.
func TestDoctorReportsTheDaemonsSettings(t *testing.T) {
	d := startServe(t, "--max-kernels", "7", "--idle-timeout", "17m")
	for _, owner := range []string{"a", "b", "c"} {
		if r := cli(t, "", "exec", "--socket", d.socket, "--owner", owner, "1"); r.code != 0 {
			t.Fatalf("exec for %s: %+v", owner, r)
		}
	}
	// Only the socket names the daemon: every other flag is left at its default.
	r := cli(t, "", "doctor", "--socket", d.socket)
	for _, want := range []string{"the running daemon's", "max 7,", "idle 17m0s", "state dir:    " + d.state, "3 kernel(s) and "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
	// The default profile keeps warm spares: listed, and counted apart.
	if n := strings.Count(r.stdout, ":  owner "); n != 3 {
		t.Errorf("doctor listed %d owners' kernels, want 3:\n%s", n, r.stdout)
	}
}

// waitUntil polls cond (tests only) for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, cond)
}

func TestServeSecondSignalForcesTeardown(t *testing.T) {
	// A grace far longer than the test's patience: only the second signal
	// can make the daemon stop in time.
	d := startServe(t, "--drain-grace", "10m")
	slow := make(chan cliResult, 1)
	go func() {
		slow <- cli(t, "", "exec", "--socket", d.socket, "--owner", "slow", "import time; time.sleep(600)")
	}()
	var pid int
	waitUntil(t, "the slow cell", func() bool {
		pid = busyPid(t, d, "slow")
		return pid > 0
	})
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the daemon to drain", func() bool { return strings.Contains(d.logText(), "draining") })
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		d.exited <- err
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, d.logText())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("a second signal did not end the 10m grace\n%s", d.logText())
	}
	if r := <-slow; r.code != 3 {
		t.Errorf("the cell cut short: %+v, want exit 3", r)
	}
	if !pidGone(pid) {
		t.Errorf("kernel pid %d survives the forced teardown", pid)
	}
}

// Ctrl-C on exec disconnects: the daemon interrupts the cell and the
// kernel keeps its variables.
func TestExecCtrlCInterruptsCell(t *testing.T) {
	d := startServe(t)
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "ctrlc", "x = 11"); r.code != 0 {
		t.Fatalf("first cell: %+v", r)
	}
	cmd := exec.Command(binPath, "exec", "--socket", d.socket, "--owner", "ctrlc", "import time; time.sleep(600)")
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	waitUntil(t, "the cell", func() bool {
		pid = busyPid(t, d, "ctrlc")
		return pid > 0
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 || !strings.Contains(errb.String(), "interrupted") {
		t.Fatalf("interrupted exec: %v, stderr %q; want exit 3", err, errb.String())
	}
	waitUntil(t, "the interrupted cell to end", func() bool { return busyPid(t, d, "ctrlc") == 0 })
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "ctrlc", "print(x)"); r.stdout != "11\n" {
		t.Fatalf("after Ctrl-C: %+v, want x", r)
	}
	if !strings.Contains(cli(t, "", "ps", "--socket", d.socket, "--json").stdout, fmt.Sprintf(`"pid": %d,`, pid)) {
		t.Fatalf("kernel pid %d is gone after Ctrl-C", pid)
	}
}

// busyPid returns the pid of owner's kernel while it runs a cell, else 0.
func busyPid(t *testing.T, d *testDaemon, owner string) int {
	r := cli(t, "", "ps", "--socket", d.socket, "--json")
	var list api.KernelList
	_ = json.Unmarshal([]byte(r.stdout), &list)
	for _, k := range list.Kernels {
		if k.Owner == owner && k.Busy {
			return k.Pid
		}
	}
	return 0
}

func TestServeRefusesUnreachableStateDir(t *testing.T) {
	testenv.RequirePython(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: only then do kernels run as other uids")
	}
	dir, err := os.MkdirTemp("", "kpx") // 0700: kernel uids cannot pass
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r := cli(t, "", "serve", "--config", privateCgroupConfig(t, dir), "--socket", dir+"/kp.sock",
		"--state-dir", dir+"/state", "--interpreter", testenv.Python)
	if r.code != 1 || !strings.Contains(r.stderr, "staging dirs") || !strings.Contains(r.stderr, dir) {
		t.Fatalf("serve with a state dir behind a 0700 dir: %+v", r)
	}
	if _, err := os.Lstat(dir + "/kp.sock"); !os.IsNotExist(err) {
		t.Errorf("a refused start left its socket: %v", err)
	}
}

func TestExecRefusesUnusableCwd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only then do kernels run as other uids")
	}
	d := startServe(t)
	private, err := os.MkdirTemp("", "kpcwd") // 0700, root's
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(private)
	r := cli(t, "", "exec", "--socket", d.socket, "--cwd", private, "1")
	if r.code != 2 || !strings.Contains(r.stderr, private) {
		t.Fatalf("exec with a cwd kernels cannot enter: %+v", r)
	}
	if r := cli(t, "", "exec", "--socket", d.socket, "--cwd", "/", "import os; print(os.getcwd())"); r.code != 0 || r.stdout != "/\n" {
		t.Fatalf("exec with cwd /: %+v", r)
	}
}

// kernpool spill prints exactly the spill a result names; a spill that is
// not there is exit 1, a missing argument exit 2.
func TestSpillCommand(t *testing.T) {
	d := startServe(t)
	r := cli(t, "", "exec", "--socket", d.socket, "--owner", "s", "--json", "print('z' * 60000)")
	var res pool.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.StdoutSpillName == "" {
		t.Fatalf("exec: %v %+v", err, r)
	}
	if got := cli(t, "", "spill", "--socket", d.socket, res.Kernel.ID, res.StdoutSpillName); got.code != 0 || got.stdout != strings.Repeat("z", 60000)+"\n" {
		t.Fatalf("spill: exit %d, %d bytes, stderr %q", got.code, len(got.stdout), got.stderr)
	}
	if got := cli(t, "", "spill", "--socket", d.socket, res.Kernel.ID, "cell_000099_stdout.txt"); got.code != 1 || !strings.Contains(got.stderr, "no spill") {
		t.Fatalf("missing spill: %+v", got)
	}
	if got := cli(t, "", "spill", "--socket", d.socket, res.Kernel.ID); got.code != 2 {
		t.Fatalf("spill without a name: %+v", got)
	}
}

// TestPsListsCheckpoints: with persist = true and a cap of one kernel,
// the evicted owner's checkpoint shows in ps (table and --json).
func TestPsListsCheckpoints(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "persist.hcl")
	src := fmt.Sprintf("cgroup {\n  parent = \"kernpool-clitest-%d-persist\"\n}\nprofile \"default\" {\n  persist = true\n}\n", os.Getpid())
	if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, "--config", conf, "--max-kernels", "1")
	for _, owner := range []string{"alice", "bob"} { // bob's kernel evicts alice's
		if r := cli(t, "", "exec", "--socket", d.socket, "--owner", owner, "x = 1"); r.code != 0 {
			t.Fatalf("exec %s: %+v", owner, r)
		}
	}
	r := cli(t, "", "ps", "--socket", d.socket)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 5 || lines[2] != "" || !strings.HasPrefix(lines[3], "CHECKPOINT OWNER") ||
		!strings.HasPrefix(lines[4], "alice") || !strings.Contains(lines[4], "evicted") {
		t.Fatalf("ps: %+v", r)
	}
	var list api.KernelList
	r = cli(t, "", "ps", "--socket", d.socket, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Kernels) != 1 || len(list.Checkpoints) != 1 ||
		list.Checkpoints[0].Owner != "alice" || list.Checkpoints[0].Names != 1 {
		t.Fatalf("ps --json: %v\n%s", err, r.stdout)
	}
}
