//go:build windows

package isolate

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/kernpool/kernpool/kernel"
	"golang.org/x/sys/windows"
)

// fakeKernel is a helper process tree in a sandbox's job: the tree process
// (the "kernel") and its leaf child.
type fakeKernel struct {
	cmd          *exec.Cmd
	child, grand windows.Handle
}

// startTree starts the tree helper under sb exactly as package kernel does
// (Prepare, Start, Started before any child exists), then lets it start
// its leaf. Everything is killed and waited for when the test ends.
func startTree(t *testing.T, sb *Sandbox) *fakeKernel {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=tree")
	if err := sb.Prepare(cmd, testTempDir(t)); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	fk := &fakeKernel{cmd: cmd}
	t.Cleanup(func() { fk.cleanup(t, sb) })
	if err := sb.Started(cmd.Process.Pid); err != nil {
		t.Fatalf("started: %v", err)
	}
	fk.child = openProc(t, uint32(cmd.Process.Pid))
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatalf("release helper: %v", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read leaf pid: %v", err)
	}
	pid, err := strconv.ParseUint(strings.TrimSpace(line), 10, 32)
	if err != nil {
		t.Fatalf("leaf pid %q: %v", line, err)
	}
	fk.grand = openProc(t, uint32(pid))
	return fk
}

// cleanup kills whatever is left (by handle, only our own helpers) and
// reaps the tree process, so no child holds the test's output open.
func (fk *fakeKernel) cleanup(t *testing.T, sb *Sandbox) {
	_ = sb.Kill()
	_, _ = sb.Release()
	for _, h := range []windows.Handle{fk.grand, fk.child} {
		if h != 0 {
			_ = windows.TerminateProcess(h, 9)
			_ = windows.CloseHandle(h)
		}
	}
	_ = fk.cmd.Process.Kill()
	_ = fk.cmd.Wait()
}

func openProc(t *testing.T, pid uint32) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_INFORMATION|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		t.Fatalf("open process %d: %v", pid, err)
	}
	return h
}

// inJob reports whether the process is a member of job.
func inJob(t *testing.T, h, job windows.Handle) bool {
	t.Helper()
	// x/sys/windows has no IsProcessInJob wrapper.
	var in int32
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("IsProcessInJob")
	if ok, _, err := proc.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in))); ok == 0 {
		t.Fatalf("IsProcessInJob: %v", err)
	}
	return in != 0
}

// running reports whether the process has not exited (a zero wait).
func running(t *testing.T, h windows.Handle) bool {
	t.Helper()
	ev, err := windows.WaitForSingleObject(h, 0)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return ev == uint32(windows.WAIT_TIMEOUT)
}

// awaitExit waits (bounded, generously: this is no timing assertion) for
// the process to end and returns its exit code.
func awaitExit(t *testing.T, what string, h windows.Handle) uint32 {
	t.Helper()
	ev, err := windows.WaitForSingleObject(h, 30_000)
	if err != nil || ev != windows.WAIT_OBJECT_0 {
		t.Fatalf("%s still running after the job was killed (wait %d, %v)", what, ev, err)
	}
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		t.Fatalf("%s exit code: %v", what, err)
	}
	return code
}

func newWinSandbox(t *testing.T) *Sandbox {
	t.Helper()
	iso, err := New(Config{StateDir: testTempDir(t), Isolation: kernel.IsolationProcess})
	if err != nil {
		t.Fatalf("new isolator: %v", err)
	}
	t.Cleanup(func() { _ = iso.Close() })
	sb, err := iso.reserve("kjob"+strconv.Itoa(os.Getpid()), "owner", "", Limits{})
	if err != nil {
		t.Fatalf("new sandbox: %v", err)
	}
	return sb
}

// Kill (TerminateJobObject) ends the kernel, its child and its grandchild:
// the grandchild was started after Started, so the job caught it without
// the kernel's help. Kill and Release are idempotent.
func TestJobKillEndsWholeTree(t *testing.T) {
	sb := newWinSandbox(t)
	fk := startTree(t, sb)
	for name, h := range map[string]windows.Handle{"child": fk.child, "grandchild": fk.grand} {
		if !running(t, h) {
			t.Fatalf("%s exited before the kill", name)
		}
		if !inJob(t, h, sb.job) {
			t.Fatalf("%s is not in the sandbox's job", name)
		}
	}
	if err := sb.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	// TerminateJobObject(job, 1) sets exit code 1 on every member: a code
	// of 1 proves the job, not a helper's own exit, ended them.
	if code := awaitExit(t, "child", fk.child); code != 1 {
		t.Errorf("child exit code %d, want 1 (terminated by the job)", code)
	}
	if code := awaitExit(t, "grandchild", fk.grand); code != 1 {
		t.Errorf("grandchild exit code %d, want 1 (terminated by the job)", code)
	}
	if err := sb.Kill(); err != nil {
		t.Errorf("second kill: %v", err)
	}
	if _, err := sb.Release(); err != nil {
		t.Errorf("release: %v", err)
	}
	if _, err := sb.Release(); err != nil {
		t.Errorf("second release: %v", err)
	}
	if err := sb.Kill(); err != nil {
		t.Errorf("kill after release: %v", err)
	}
}

// Release alone closes the job, and KILL_ON_JOB_CLOSE ends the whole tree:
// the path a daemon dying without Kill takes.
func TestJobReleaseKillsOnClose(t *testing.T) {
	sb := newWinSandbox(t)
	fk := startTree(t, sb)
	if !running(t, fk.grand) {
		t.Fatal("grandchild exited before release")
	}
	if _, err := sb.Release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	awaitExit(t, "child", fk.child)
	awaitExit(t, "grandchild", fk.grand)
}
