package kernel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// The helper-process trick: the test binary re-execs itself as a fake
// daemon (helperEnv names the mode) so a test can SIGKILL a kernel's host.
const (
	helperEnv      = "KERNPOOL_KERNEL_TEST_HELPER"
	helperStateEnv = "KERNPOOL_KERNEL_TEST_STATE"
	helperCellEnv  = "KERNPOOL_KERNEL_TEST_CELL"
)

// runHelper is the fake daemon: it starts a kernel, starts a long cell and
// prints "READY <kernel pid> <grandchild pid>" once the cell runs, then
// waits to be killed.
func runHelper(mode string) int {
	if mode != "hostdie" {
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	state := os.Getenv(helperStateEnv)
	k, err := Start(context.Background(), Spec{ID: "khelper", Interpreter: testenv.Python, StateDir: state, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	r, err := k.Exec(context.Background(), Cell{Code: "import os, subprocess\nc = subprocess.Popen(['/bin/sleep', '60'])\nprint(os.getpid(), c.pid)"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "exec:", err)
		return 1
	}
	marker := filepath.Join(state, "cell-started")
	go k.Exec(context.Background(), Cell{Code: "open(" + fmt.Sprintf("%q", marker) + ", 'w').close()\n" + os.Getenv(helperCellEnv)})
	for { // the helper may poll: it is a test fixture
		if _, err := os.Stat(marker); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Printf("READY %s\n", strings.TrimSpace(r.Stdout))
	select {}
}

func TestHostSIGKILLMidCellKillsKernel(t *testing.T) {
	testenv.RequirePython(t)
	requireProc(t)
	cases := []struct{ name, cell string }{
		{"sleeping cell", "import time; time.sleep(60)"},
		{"cell holding the GIL in C", "sum(range(10**13))"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=hostdie", helperStateEnv+"="+state, helperCellEnv+"="+c.cell)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			var kpid, child int
			if _, serr := fmt.Sscanf(line, "READY %d %d", &kpid, &child); err != nil || serr != nil {
				t.Fatalf("helper said %q (%v, %v)", line, err, serr)
			}
			if !alive(kpid) || !alive(child) {
				t.Fatal("kernel not running before the host died")
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if !waitDead(kpid, testenv.Patience) {
				_ = syscall.Kill(-kpid, syscall.SIGKILL) // clean up before failing
				t.Fatalf("kernel %d survived its host", kpid)
			}
			if !waitDead(child, testenv.Patience) {
				_ = syscall.Kill(child, syscall.SIGKILL)
				t.Fatalf("kernel child %d survived its host", child)
			}
		})
	}
}

// A kernel must not die when the goroutine that started it ran on a
// thread that later exits (Pdeathsig follows the forking thread).
func TestKernelSurvivesExitOfStartingThread(t *testing.T) {
	requireProc(t)
	spec := baseSpec(t)
	type result struct {
		k   *Kernel
		err error
		tid int
	}
	ch := make(chan result, 1)
	// Go never ends the main thread, so park any goroutine that lands on it.
	parked := make(chan struct{})
	defer close(parked)
	var r result
	for r.k == nil && r.err == nil {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			if syscall.Gettid() == syscall.Getpid() {
				ch <- result{}
				<-parked
				return
			}
			k, err := Start(context.Background(), spec)
			ch <- result{k, err, syscall.Gettid()}
		}()
		r = <-ch
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { requireGone(t, r.k) })
	task := fmt.Sprintf("/proc/self/task/%d", r.tid)
	for end := time.Now().Add(testenv.Patience); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(task); err != nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the starting thread never exited")
		}
	}
	if rep := mustExec(t, r.k, "'alive'"); rep.Stdout != "'alive'\n" {
		t.Fatalf("reply %+v", rep)
	}
}

// With Pdeathsig and the pidfd watchdog out of play (the test starts the
// runner itself and stays alive), only the runner's request-pipe watcher
// can see the host go: closing the pipe mid-cell must take the runner and
// the cell's child down. This is the layer non-Linux hosts rely on.
func TestRequestPipeHangupMidCellKillsKernel(t *testing.T) {
	testenv.RequirePython(t)
	requireProc(t)
	staging := t.TempDir()
	for name, data := range runnerFiles {
		if err := os.WriteFile(filepath.Join(staging, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(testenv.Python, filepath.Join(staging, runnerFile))
	cmd.Dir = staging
	spec := Spec{}
	spec.fillCaps()
	cmd.Env = []string{"PATH=/usr/bin:/bin", EnvOutputCaps + "=" + outputCapsValue(&spec)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	cell := `import os, subprocess, time\nc = subprocess.Popen(['/bin/sleep', '60'])\nos.write(1, b'CHILD %d\\n' % c.pid)\ntime.sleep(60)`
	if _, err := io.WriteString(stdin, "KERNPOOL1 "+testSentinel+" -\n"+`{"id":"1","code":"`+cell+`"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	var child int
	for sc := bufio.NewScanner(out); child == 0 && sc.Scan(); {
		_, _ = fmt.Sscanf(sc.Text(), "CHILD %d", &child)
	}
	if child == 0 || !alive(child) {
		t.Fatalf("the cell's child never ran (pid %d)", child)
	}
	_ = stdin.Close()
	if !waitDead(cmd.Process.Pid, testenv.Patience) {
		t.Fatalf("runner %d survived the end of its request pipe by 5 s", cmd.Process.Pid)
	}
	if !waitDead(child, testenv.Patience) {
		t.Fatalf("the cell's child %d survived the end of the request pipe by 5 s", child)
	}
}
