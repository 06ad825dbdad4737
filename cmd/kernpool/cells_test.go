//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// exec --stream shows the first line while the cell still runs: when the
// line arrives the daemon still lists the kernel as busy (the cell sleeps
// 2 s before its second line).
func TestExecStreamsLive(t *testing.T) {
	d := startServe(t)
	code := "import time\nprint('a')\ntime.sleep(2)\nprint('b')"
	cmd := exec.Command(binPath, "exec", "--socket", d.socket, "--owner", "live", "--stream", code)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || line != "a\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if busyPid(t, d, "live") == 0 {
		t.Fatal("the first line came only after the cell ended")
	}
	rest, _ := r.ReadString(0)
	if err := cmd.Wait(); err != nil || rest != "b\n" {
		t.Fatalf("rest %q, exit %v", rest, err)
	}
	// --json keeps printing the one final object.
	j := cli(t, "", "exec", "--socket", d.socket, "--stream", "--json", "print('x')")
	if j.code != 0 || !strings.HasPrefix(j.stdout, "{") || !strings.Contains(j.stdout, `"output": "x\n"`) {
		t.Fatalf("--stream --json: %+v", j)
	}
}

func TestExecOutputsAndExitCode(t *testing.T) {
	d := startServe(t)
	dir := t.TempDir()
	code := "class P:\n    def _repr_png_(self): return b'\\x89PNG\\r\\n-data'\nprint('hi')\nP()"
	for _, stream := range []string{"--stream", "--json=false"} {
		r := cli(t, "", "exec", "--socket", d.socket, stream, "--outputs", dir, code)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 || lines[0] != "hi" || filepath.Dir(lines[1]) != dir {
			t.Fatalf("%s: %+v", stream, r)
		}
		data, err := os.ReadFile(lines[1])
		if err != nil || !bytes.Equal(data, []byte("\x89PNG\r\n-data")) {
			t.Fatalf("%s: display file %q: %q, %v", stream, lines[1], data, err)
		}
	}
	if r := cli(t, "", "exec", "--socket", d.socket, "import sys; sys.exit(3)"); r.code != 1 {
		t.Fatalf("sys.exit(3): %+v, want exit 1", r)
	}
	if r := cli(t, "", "exec", "--socket", d.socket, "import sys; sys.exit(0)"); r.code != 0 {
		t.Fatalf("sys.exit(0): %+v, want exit 0", r)
	}
}

func TestInterruptAndVarsCLI(t *testing.T) {
	testenv.RequirePython(t)
	d := startServe(t)
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "v", "z = 'zed'\nn = [1, 2, 3]"); r.code != 0 {
		t.Fatal(r)
	}
	r := cli(t, "", "vars", "--socket", d.socket, "--owner", "v")
	if r.code != 0 || !strings.Contains(r.stdout, "n     list  len 3  [1, 2, 3]") || !strings.Contains(r.stdout, "z     str   len 3  'zed'") {
		t.Fatalf("vars: %+v", r)
	}
	if r := cli(t, "", "interrupt", "--socket", d.socket, "--owner", "v"); r.code != 1 || !strings.Contains(r.stderr, "no running cell") {
		t.Fatalf("idle interrupt: %+v", r)
	}
	cmd := exec.Command(binPath, "exec", "--socket", d.socket, "--owner", "v", "--stream", "import time\nprint('go', flush=True)\ntime.sleep(60)")
	out, _ := cmd.StdoutPipe()
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "go\n" {
		t.Fatalf("first line %q", line)
	}
	if r := cli(t, "", "vars", "--socket", d.socket, "--owner", "v"); r.code != 1 || !strings.Contains(r.stderr, "is running a cell") {
		t.Fatalf("vars while busy: %+v", r)
	}
	id := strings.Fields(cli(t, "", "interrupt", "--socket", d.socket, "--owner", "v").stdout)
	if len(id) != 2 || id[0] != "interrupted" {
		t.Fatalf("interrupt: %v", id)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(errb.String(), "variables and imports survived") {
		t.Fatalf("interrupted exec: %v, stderr %q", err, errb.String())
	}
	if r := cli(t, "", "interrupt", "--socket", d.socket, id[1]); r.code != 1 || !strings.Contains(r.stderr, "runs no cell") {
		t.Fatalf("interrupt by id when idle: %+v", r)
	}
}

// Under the daemon's real sandbox (the init step, a pid namespace, a
// cgroup when root), an interrupt ends the cell's subprocess and keeps
// the interpreter and its helpers: the cgroup's task count drops by one.
func TestInterruptEndsSubprocessInSandbox(t *testing.T) {
	d := startServe(t)
	pids := func() int64 {
		var list struct {
			Kernels []struct {
				Owner string `json:"owner"`
				Pids  int64  `json:"pids"`
			} `json:"kernels"`
		}
		_ = json.Unmarshal([]byte(cli(t, "", "ps", "--socket", d.socket, "--json").stdout), &list)
		for _, k := range list.Kernels {
			if k.Owner == "sub" {
				return k.Pids
			}
		}
		return -1
	}
	// Streamed like the cell below: the runner's live-output flusher
	// thread (started by the first streamed cell) is in the baseline.
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "sub", "--stream", "import subprocess"); r.code != 0 {
		t.Fatal(r)
	}
	before := pids()
	if before <= 0 {
		t.Skip("no cgroup task counts here (needs root and cgroups)")
	}
	cmd := exec.Command(binPath, "exec", "--socket", d.socket, "--owner", "sub", "--stream",
		"p = subprocess.Popen(['sleep', '600'])\nprint('go', flush=True)\np.wait()")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "go\n" {
		t.Fatalf("first line %q", line)
	}
	if got := pids(); got != before+1 {
		t.Fatalf("tasks with the sleep: %d, want %d", got, before+1)
	}
	if r := cli(t, "", "interrupt", "--socket", d.socket, "--owner", "sub"); r.code != 0 {
		t.Fatal(r)
	}
	_ = cmd.Wait()
	// The sleep must be dead: gone or a zombie (its parent, the cell's
	// Popen, may not have reaped it: CPython's wait gives a child only
	// 0.25 s after a KeyboardInterrupt, and a status reaped just before
	// the KeyboardInterrupt is raised is lost, so returncode may read 0).
	// Death is judged by State, polled while the SIGKILL lands; the cell
	// then reaps it, and the kernel is back to its own tasks.
	check := "import time\n" +
		"def state(pid):\n" +
		"    try:\n" +
		"        return [l.split()[1] for l in open('/proc/%d/status' % pid) if l.startswith('State:')][0]\n" +
		"    except FileNotFoundError:\n" +
		"        return 'gone'\n" +
		"end = time.monotonic() + 10\n" +
		"while state(p.pid) not in ('Z', 'gone') and time.monotonic() < end:\n" +
		"    time.sleep(0.01)\n" +
		"dead = state(p.pid) in ('Z', 'gone')\n" +
		"print(dead, dead and p.wait() in (-9, 0))"
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "sub", check); r.stdout != "True True\n" {
		t.Fatalf("after the interrupt: %+v", r)
	}
	// A thread of the kernel's that is exiting still counts for a moment
	// under load: wait for the count to settle, and fail if it never does.
	got := pids()
	testenv.WaitFor(t, fmt.Sprintf("the kernel back to %d tasks (the sleep gone, the rest kept)", before), func() bool {
		got = pids()
		return got <= before
	})
	if got != before {
		t.Fatalf("tasks after the interrupt: %d, want %d (the sleep gone, the rest kept)", got, before)
	}
}
