package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// scrubTestDir is a sticky world-writable tmpfs like /run/lock (tmpfs:
// a flood on a disk takes minutes).
func scrubTestDir(t *testing.T) string {
	t.Helper()
	return scrubTmpfs(t, 400000)
}

// scrubTmpfs is scrubTestDir with room for inodes entries (tmpfs counts
// every hard link against nr_inodes).
func scrubTmpfs(t *testing.T, inodes int) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "lock")
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	opts := "mode=1777,size=64m,nr_inodes=" + strconv.Itoa(inodes)
	if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatalf("mount a tmpfs for the scrub test: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(d, unix.MNT_DETACH) })
	return d
}

// flood creates n empty files owned by uid in dir, as a tenant would.
func flood(t *testing.T, dir string, uid, n int) {
	t.Helper()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	for i := 0; i < n; i++ {
		fd, err := unix.Openat(dfd, "f"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err == nil {
			err = unix.Fchown(fd, uid, uid)
			_ = unix.Close(fd)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func countEntries(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// A tenant that floods a world-writable dir with more entries than one
// scrub removes cannot make its uid (or the pool) unusable: the lease
// succeeds anyway, the scrub reports the bound, and later scrubs finish
// the job. Another uid's entries are not counted against the bound.
func TestScrubEntryFloodNeverRetiresTheUID(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other, n = 61993, 61994, scrubMaxRemoved*2 + 50
	dir := scrubTestDir(t)
	flood(t, dir, uid, n)
	if err := os.WriteFile(filepath.Join(dir, "theirs"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(filepath.Join(dir, "theirs"), other, other)
	p := newUIDPool(uid, uid, false, "", nil)
	var results []error
	p.scrub = func(u int) {
		_, err := scrubUID([]string{dir}, u)
		results = append(results, err)
	}
	for lease := 1; lease <= 3; lease++ {
		got, err := p.acquire("next-owner")
		if err != nil || got != uid {
			t.Fatalf("lease %d: uid %d, %v; want %d (a flood must not retire it)", lease, got, err, uid)
		}
		p.release(got)
		if p.taintedCount() != 0 {
			t.Fatalf("lease %d: %d uids retired", lease, p.taintedCount())
		}
	}
	if !errors.Is(results[0], errScrubBound) || !errors.Is(results[1], errScrubBound) || results[2] != nil {
		t.Errorf("scrub results = %v; want the bound twice, then done", results)
	}
	if got := countEntries(t, dir); got != 1 {
		t.Errorf("%d entries left, want 1 (the other uid's file)", got)
	}
}

// Trees of any depth go: the uid's own tree (far deeper than the fds the
// walk holds) and the uid's file at the bottom of another uid's chain of
// world-writable dirs, whose dirs stay.
func TestScrubDeepTrees(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other, depth = 61995, 61996, scrubHeldFDs*3 + 11
	dir := scrubTestDir(t)
	_ = unix.Close(mkChain(t, dir, "mine", uid, 0o700, depth))
	bottom := mkChain(t, dir, "shared", other, 0o777, depth)
	f, err := unix.Openat(bottom, "mine-at-the-bottom", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Fchown(f, uid, uid)
	_ = unix.Close(f)
	if err := unix.Faccessat(bottom, "mine-at-the-bottom", unix.F_OK, 0); err != nil {
		t.Fatal(err)
	}
	res, err := scrubUID([]string{dir}, uid)
	if err != nil {
		t.Fatalf("scrub: %v", err)
	}
	if res.Removed != depth+1 {
		t.Errorf("removed %d entries, want %d (the %d-deep tree and the file)", res.Removed, depth+1, depth)
	}
	if _, err := os.Lstat(filepath.Join(dir, "mine")); !os.IsNotExist(err) {
		t.Errorf("the uid's deep tree survived: %v", err)
	}
	if err := unix.Faccessat(bottom, "mine-at-the-bottom", unix.F_OK, 0); !errors.Is(err, unix.ENOENT) {
		t.Errorf("the uid's file at depth %d survived: %v", depth, err)
	}
	if err := unix.Faccessat(bottom, ".", unix.F_OK, 0); err != nil {
		t.Errorf("the other uid's chain was removed: %v", err)
	}
	_ = unix.Close(bottom)
}

// mkChain makes dir/top/d/d/... depth dirs deep, each owned by owner with
// mode, and returns an fd of the bottom one.
func mkChain(t *testing.T, dir, top string, owner int, mode uint32, depth int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := top
	for i := 0; i < depth; i++ {
		if err := unix.Mkdirat(fd, name, 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fchown(next, owner, owner); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fchmod(next, mode); err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(fd)
		fd, name = next, "d"
	}
	return fd
}

// A retired uid comes back by itself once no process runs as it.
func TestUIDPoolRevivesCleanUIDs(t *testing.T) {
	p := newUIDPool(100, 100, false, "", map[int]bool{100: true})
	running := true
	p.busy = func(int) bool { return running }
	if _, err := p.acquire("x"); !errors.Is(err, ErrNoUID) {
		t.Fatalf("acquire with the only uid busy: %v, want ErrNoUID", err)
	}
	running = false
	if uid, err := p.acquire("x"); err != nil || uid != 100 {
		t.Fatalf("acquire once it is clean: %d, %v; want 100", uid, err)
	}
	if p.taintedCount() != 0 {
		t.Errorf("tainted = %d after the revival", p.taintedCount())
	}
}

// The host walk finds every dir a kernel uid could write and can reach:
// sticky world-writable ones are private, the others read-only; it does
// not follow symlinks, enter what a kernel cannot search, nor a kernpool
// state dir.
func TestHostWritableFindsReachableWritableDirs(t *testing.T) {
	testenv.RequireRoot(t)
	const first, last = 61980, 61989
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(rel string, mode os.FileMode, uid int) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	mk("scratch", 0o777|os.ModeSticky, 0)
	mk("scratch/inner", 0o777|os.ModeSticky, 0) // hidden by scratch's tmpfs
	mk("shared", 0o777, 0)
	mk("opt/leftover", 0o700, first+3)
	mk("opt/mine", 0o500, first+4) // its owner can chmod it writable
	mk("private/deep", 0o777|os.ModeSticky, 0)
	mk("private", 0o700, 0) // a kernel cannot search it: deep is unreachable
	mk("state/kernels/k1", 0o700, first)
	mk("state", 0o711, 0)
	if err := os.WriteFile(filepath.Join(root, "state", stateLockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "scratch"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	hp, err := hostWritable(root, first, last, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(ps []string) string {
		var out []string
		for _, p := range ps {
			r, _ := filepath.Rel(root, p)
			out = append(out, r)
		}
		return strings.Join(out, " ")
	}
	if got := rel(hp.Private); got != "scratch" {
		t.Errorf("private = %q, want scratch", got)
	}
	if got := rel(hp.ReadOnly); got != "opt/leftover opt/mine shared" {
		t.Errorf("read-only = %q, want opt/leftover opt/mine shared", got)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := hostWritable(root, first, last, nil); err == nil {
		t.Error("a root kernels could write was accepted")
	}
}
