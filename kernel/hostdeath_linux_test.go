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
	"golang.org/x/sys/unix"
)

// The helper-process trick: the test binary re-execs itself as a fake
// daemon (helperEnv names the mode) so a test can SIGKILL a kernel's host.
const (
	helperEnv      = "KERNPOOL_KERNEL_TEST_HELPER"
	helperStateEnv = "KERNPOOL_KERNEL_TEST_STATE"
	helperCellEnv  = "KERNPOOL_KERNEL_TEST_CELL"
)

// runHelper runs a helper mode: "reaper", "hostdie" or "scanpid9".
func runHelper(mode string) int {
	switch mode {
	case "reaper":
		return runReaper()
	case "hostdie":
		return runHostDie()
	case "scanpid9":
		return runScanPid9()
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// runReaper becomes a child subreaper, starts the fake daemon and prints
// "HOST <pid>", then "EXIT <pid> <signal> <code>" for every process it
// reaps: the daemon's kernel and the kernel's children are orphaned to it
// when the daemon dies, so the test learns how each one ended (killed, or
// exited by itself) without being their parent.
func runReaper() int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		return 1
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=hostdie")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start daemon:", err)
		return 1
	}
	fmt.Printf("HOST %d\n", cmd.Process.Pid)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0 // ECHILD: every orphan reaped
		}
		sig := -1
		if ws.Signaled() {
			sig = int(ws.Signal())
		}
		fmt.Printf("EXIT %d %d %d\n", pid, sig, ws.ExitStatus())
	}
}

// runHostDie is the fake daemon: it starts a kernel, starts a long cell
// and prints "READY <kernel pid> <child pid> <watchdog pid>" once the cell
// runs, then waits to be killed.
func runHostDie() int {
	state := os.Getenv(helperStateEnv)
	k, err := Start(context.Background(), Spec{ID: "khelper", Interpreter: testenv.Python, StateDir: state, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	// The runner's other child is its watchdog.
	r, err := k.Exec(context.Background(), Cell{Code: `import os, subprocess
c = subprocess.Popen(['/bin/sleep', '3600'])
me = os.getpid()
kids = open('/proc/%d/task/%d/children' % (me, me)).read().split()
print(me, c.pid, *[k for k in kids if int(k) != c.pid])`})
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

// TestHostSIGKILLMidCellKillsKernel SIGKILLs a kernel's host mid-cell: the
// kernel and its child die. The child outlives the test's patience unless
// killed, and the watchdog must end by its own group kill (SIGKILL), not
// exit: how the reaper saw them end tells the watchdog acted. With a cell
// holding the GIL in C only the watchdog can act (Pdeathsig kills the
// runner before any Python code runs).
func TestHostSIGKILLMidCellKillsKernel(t *testing.T) {
	testenv.RequirePython(t)
	requireProc(t)
	cases := []struct{ name, cell string }{
		{"sleeping cell", "import time; time.sleep(3600)"},
		{"cell holding the GIL in C", "sum(range(10**13))"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hostDiesMidCell(t, c.cell)
		})
	}
}

func hostDiesMidCell(t *testing.T, cell string) {
	state := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=reaper", helperStateEnv+"="+state, helperCellEnv+"="+cell)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	var host, kpid, child, watchdog int
	exits := map[int][2]int{} // pid -> signal, exit code
	defer func() {
		for _, pid := range []int{kpid, child, watchdog} {
			if _, ok := exits[pid]; !ok && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the reaper ended while waiting for %s", what)
			}
			return l
		case <-time.After(testenv.Patience):
			t.Fatalf("no %s after %v", what, testenv.Patience)
		}
		return ""
	}
	for host == 0 || kpid == 0 {
		l := next("host and kernel pids")
		_, _ = fmt.Sscanf(l, "HOST %d", &host)
		if n, _ := fmt.Sscanf(l, "READY %d %d %d", &kpid, &child, &watchdog); strings.HasPrefix(l, "READY") && n != 3 {
			t.Fatalf("helper said %q", l)
		}
	}
	if !alive(kpid) || !alive(child) || !alive(watchdog) {
		t.Fatal("kernel not running before the host died")
	}
	if err := syscall.Kill(host, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The watchdog's end is checked as soon as it comes: one that exited
	// leaves the child running past the test's patience.
	for _, pid := range []int{watchdog, kpid, child} {
		for _, ok := exits[pid]; !ok; _, ok = exits[pid] {
			var p, sig, code int
			if _, err := fmt.Sscanf(next("the kernel's processes to end"), "EXIT %d %d %d", &p, &sig, &code); err == nil {
				exits[p] = [2]int{sig, code}
			}
			if p == watchdog && sig != int(syscall.SIGKILL) {
				t.Fatalf("watchdog %d ended with signal %d, exit %d: it did not take the kernel's group down (SIGKILL, itself included)", watchdog, sig, code)
			}
		}
	}
	if e := exits[child]; e[0] != int(syscall.SIGKILL) {
		t.Errorf("kernel child %d ended with signal %d, exit %d, not killed with its kernel", child, e[0], e[1])
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
// the cell's child down. This is the layer non-Linux hosts rely on. The
// cell and its child outlive the test's patience, and the runner must end
// without replying to the cell: the only other way down, the main thread
// reading the pipe's end, comes after the cell's reply.
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
	var child int
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if child > 0 {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	}()
	cell := `import os, subprocess, time\nc = subprocess.Popen(['/bin/sleep', '3600'])\nos.write(1, b'CHILD %d\\n' % c.pid)\ntime.sleep(3600)`
	if _, err := io.WriteString(stdin, "KERNPOOL1 "+testSentinel+" -\n"+`{"id":"1","code":"`+cell+`"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for child == 0 && sc.Scan() {
		_, _ = fmt.Sscanf(sc.Text(), "CHILD %d", &child)
	}
	if child == 0 || !alive(child) {
		t.Fatalf("the cell's child never ran (pid %d)", child)
	}
	// The watcher thread, started before the cell, ends up asleep in
	// poll(2) or (broken) gone: wait for either, then check which, instead
	// of waiting out a hang-up nothing acts on.
	if pollSyscalls == nil {
		t.Skipf("poll(2)'s syscall number unknown on %s", runtime.GOARCH)
	}
	testenv.WaitFor(t, "the runner's helper threads asleep in poll(2) or gone", func() bool {
		others, inPoll := threadsInPoll(cmd.Process.Pid)
		return others == inPoll
	})
	if _, inPoll := threadsInPoll(cmd.Process.Pid); inPoll != 1 {
		t.Fatalf("%d threads of the runner wait for the request pipe's hang-up mid-cell, want 1", inPoll)
	}
	// The rest of the output ends once the runner and the child, which
	// share its pipe, are gone.
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		rest <- b.String()
	}()
	_ = stdin.Close()
	select {
	case tail := <-rest:
		if strings.Contains(tail, `"id":"1"`) {
			t.Fatalf("the runner replied to the cell before it went down: the hang-up watcher did not act mid-cell\n%s", tail)
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("runner %d or the cell's child %d survived the end of the request pipe by %v", cmd.Process.Pid, child, testenv.Patience)
	}
	if !waitDead(cmd.Process.Pid, testenv.Patience) || !waitDead(child, testenv.Patience) {
		t.Fatalf("runner %d or the cell's child %d survived the end of the request pipe", cmd.Process.Pid, child)
	}
}
