package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// The group scan reads every numeric /proc entry, those whose pid starts
// with '9' too. The helper runs as pid 1 of a pid and mount namespace of
// its own (its own /proc), where ns_last_pid makes its child's pid start
// with 9 (900 and up: the Go runtime's threads take pids too), the leader of
// a group of its own.
func TestGroupScanSeesPid9(t *testing.T) {
	requireProc(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for the namespaces")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=scanpid9")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	var pid int
	var members string
	var runs bool
	if _, serr := fmt.Sscanf(string(out), "pid %d members %s runs %t", &pid, &members, &runs); err != nil || serr != nil {
		t.Fatalf("helper: %v, output %q", err, out)
	}
	if !strings.HasPrefix(itoa(pid), "9") || members != "["+itoa(pid)+"]" || !runs {
		t.Fatalf("group of pid %d: members %s, runs %v; want [%d], true", pid, members, runs, pid)
	}
}

// runScanPid9 is that helper: it mounts its namespace's /proc, starts a
// child whose pid starts with 9 in a group of its own and prints what the
// scan finds of that group.
func runScanPid9() int {
	fail := func(what string, err error) int {
		fmt.Println(what+":", err)
		return 1
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fail("make / private", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		return fail("mount proc", err)
	}
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte("900"), 0); err != nil {
		return fail("ns_last_pid", err)
	}
	child := exec.Command("/bin/sleep", "1000")
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		return fail("start", err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	pid := child.Process.Pid
	fmt.Println("pid", pid, "members", strings.ReplaceAll(fmt.Sprint(liveGroupMembers(pid)), " ", ","), "runs", groupRuns(pid))
	return 0
}

// Unreaped is true while the runner lives and false once it was reaped.
func TestUnreaped(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	if !k.Unreaped() {
		t.Fatal("a live kernel reads as reaped")
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if k.Unreaped() {
		t.Fatal("a killed (and reaped) kernel reads as unreaped")
	}
}
