package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestUIDLockDirKernelWritableRefused: New refuses a uid lock dir kernel
// uids could write or own (they could unlink or plant other daemons'
// uid locks) and takes one only root writes. Range 62888-62889.
func TestUIDLockDirKernelWritableRefused(t *testing.T) {
	testenv.RequireRoot(t)
	const first = 62888
	for _, c := range []struct {
		name     string
		mode     os.FileMode
		uid, gid int
		file     bool // a regular file where the dir should be
		refused  bool
	}{
		{"root's 0700", 0o700, 0, 0, false, false},
		{"root's 0755", 0o755, 0, 0, false, false},
		{"world-writable", 0o777, 0, 0, false, true},
		{"sticky world-writable", 0o1777, 0, 0, false, true},
		{"others write and search", 0o733, 0, 0, false, true},
		{"a range uid's, writable", 0o700, first, 0, false, true},
		{"a range uid's, read-only", 0o500, first + 1, 0, false, true}, // its owner can chmod it
		{"a range gid's, group-writable", 0o770, 0, first, false, true},
		{"a range gid's, group read-only", 0o750, 0, first, false, false},
		{"root's file", 0o600, 0, 0, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(testTempDir(t), "uids")
			if c.file {
				mustOK(t, os.WriteFile(dir, nil, 0o600))
			} else {
				mustOK(t, os.Mkdir(dir, 0o700))
			}
			mustOK(t, os.Chown(dir, c.uid, c.gid))
			mustOK(t, os.Chmod(dir, c.mode))
			cfg := DefaultConfig(stateDir(t))
			cfg.CgroupParent, cfg.UIDRange, cfg.UIDLockDir = testParent(t), [2]int{first, first + 1}, dir
			iso, err := New(cfg)
			if err == nil {
				mustOK(t, iso.Close())
			}
			if refused := errors.Is(err, ErrBadConfig); refused != c.refused {
				t.Fatalf("New with lock dir mode %o owner %d:%d: %v; want refused: %t", c.mode, c.uid, c.gid, err, c.refused)
			}
		})
	}
}

// TestUIDLockDirWalked: the host walk does not leave the uid lock dir
// out: a directory below it that kernel uids can write is read-only in
// every kernel. The dir is a range uid's (62890), not world-writable, so
// other tests' walks (other ranges) do not list it. Range 62890-62891.
func TestUIDLockDirWalked(t *testing.T) {
	testenv.RequireRoot(t)
	const first = 62890
	top := fmt.Sprintf("/run/kernpool-isolate-test-%d", os.Getpid()) // under /tmp it would be hidden whole (private)
	mustOK(t, os.Mkdir(top, 0o711))
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	lockDir := filepath.Join(top, "uids")
	mustOK(t, os.Mkdir(lockDir, 0o711))
	sub := filepath.Join(lockDir, "sub")
	mustOK(t, os.Mkdir(sub, 0o700))
	mustOK(t, os.Chown(sub, first, first))
	iso := newIso(t, func(cfg *Config) { cfg.UIDRange, cfg.UIDLockDir = [2]int{first, first + 1}, lockDir })
	if !iso.useInit {
		t.Skip("no init step here: no host walk")
	}
	if r := iso.Report(); !slices.Contains(r.ReadOnlyPaths, sub) {
		t.Fatalf("read-only paths %q lack %s, a range uid's dir below the uid lock dir", r.ReadOnlyPaths, sub)
	}
}
