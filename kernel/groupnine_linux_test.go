package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// nsChildEnv makes TestScanGroupSeesPidsFrom9 run as its own child, the
// first process of a fresh pid and mount namespace.
const nsChildEnv = "KERNPOOL_KERNEL_TEST_NINES"

// scanGroup reads /proc's pid directories, every one that begins with a
// digit, 9 included: a group whose leader and member have pids from 9000
// to 9999 lists both. Pids are set in a fresh pid namespace (ns_last_pid),
// with its own /proc mounted in a private mount namespace; the host's
// pids cycle too fast to wait for.
func TestScanGroupSeesPidsFrom9(t *testing.T) {
	if os.Getenv(nsChildEnv) != "" {
		scanNinesChild(t)
		return
	}
	requireProc(t)
	testenv.RequireRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestScanGroupSeesPidsFrom9$", "-test.count=1")
	cmd.Env = append(os.Environ(), nsChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "group of pids from 9 listed\n") {
		t.Fatalf("child output %q", out)
	}
}

// scanNinesChild starts a group leader and a member right after pid 8999
// (9000 or a few more: the runtime may take one first) and checks that
// scanGroup finds both.
func scanNinesChild(t *testing.T) {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte("8999"), 0); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for pgid := 0; len(pids) < 2; pgid = pids[0] {
		c := exec.Command("/bin/sleep", "1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
		pids = append(pids, c.Process.Pid)
	}
	if pids[0] < 9000 || pids[1] > 9999 {
		t.Fatalf("pids %v, want two from 9000 to 9999", pids)
	}
	members := liveGroupMembers(pids[0])
	slices.Sort(members)
	if !slices.Equal(members, pids) {
		t.Fatalf("group %d members %v, want %v", pids[0], members, pids)
	}
	fmt.Println("group of pids from 9 listed")
}
