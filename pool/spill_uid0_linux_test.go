package pool

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// uid0ChildEnv makes TestSpillDirOfAUID0Kernel run as its own child, a
// daemon that is not root (it holds the spill dir's state dir).
const uid0ChildEnv = "KERNPOOL_POOL_TEST_SPILL_UID0"

// nonRootDaemonUID is the child's uid: one with no account.
const nonRootDaemonUID = 64124

// Only -1 means "the daemon's own uid": to a daemon that is not root, a
// kernel running as uid 0 is another uid, so its spill dir is the
// daemon's, setgid 0750 with the kernel's group (0). The daemon runs in a
// child that dropped root, keeping group 0 so that it may chown to it.
func TestSpillDirOfAUID0Kernel(t *testing.T) {
	if state := os.Getenv(uid0ChildEnv); state != "" {
		spillUID0Child(t, state)
		return
	}
	testenv.RequireRoot(t)
	state := t.TempDir()
	root := filepath.Join(state, spillDirName)
	for _, dir := range []string{filepath.Dir(state), state} {
		if err := os.Chmod(dir, 0o711); err != nil { // the child may pass
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(root, spillRootMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, nonRootDaemonUID, nonRootDaemonUID); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpillDirOfAUID0Kernel$", "-test.count=1")
	cmd.Env = append(os.Environ(), uid0ChildEnv+"="+state)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	fi, err := os.Lstat(filepath.Join(root, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != nonRootDaemonUID || st.Gid != 0 || fi.Mode() != fs.ModeDir|fs.ModeSetgid|0o750 {
		t.Fatalf("spill dir %d:%d %v, want %d:0 %v", st.Uid, st.Gid, fi.Mode(), nonRootDaemonUID, fs.ModeDir|fs.ModeSetgid|0o750)
	}
}

// spillUID0Child drops root (keeping group 0) and makes the spill dir of
// kernel k1, running as uid 0.
func spillUID0Child(t *testing.T, state string) {
	if err := syscall.Setgroups([]int{0}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgid(nonRootDaemonUID); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setuid(nonRootDaemonUID); err != nil {
		t.Fatal(err)
	}
	p := &Pool{cfg: Config{StateDir: state}}
	if err := p.makeSpillDir("k1", 0); err != nil {
		t.Fatal(err)
	}
}
