package envscrub

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A full disk: the helper mounts a 64 KiB tmpfs in its own mount
// namespace and spills 1 MB there. The inline result must come back, with
// a warning naming the cause, and no partial file may remain.
func TestSpillFullDisk(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=fulldisk", "ENVSCRUB_TEST_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	text := string(out)
	if strings.HasPrefix(text, "SKIP") {
		t.Skip(text)
	}
	for _, want := range []string{"err=<nil>", "truncated=true", `spill=""`, "files=0", "inline=50077", "no space left on device"} {
		if !strings.Contains(text, want) {
			t.Errorf("helper output lacks %q:\n%s", want, text)
		}
	}
}
