package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestRotatorCountsEveryLostLine: on a full filesystem (a real tmpfs),
// the lines of a batch that spans a rotation are all counted lost, those
// before the rotation too.
func TestRotatorCountsEveryLostLine(t *testing.T) {
	testenv.RequireRoot(t)
	dir := testTempDir(t)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8k,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	r, err := openRotator(filepath.Join(dir, "audit.log"), int64(len(line)), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	// Fill the tmpfs: every write after this fails with ENOSPC.
	if err := os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 64<<10), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	rotErr, lost, err := r.writeLines([][]byte{line, line})
	if lost != 2 || !errors.Is(err, syscall.ENOSPC) || rotErr != nil {
		t.Fatalf("writeLines on a full fs = %v, %d lost, %v; want 2 lost, ENOSPC", rotErr, lost, err)
	}
}

// openFDs counts this process's open file descriptors that point into
// dir: other goroutines of the test binary (and Wine's own handles) open
// files too, so the whole table is not a figure a test can pin.
func openFDs(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// TestCloseReleasesEveryFile: rotations and Close give back every file
// they opened (counted in /proc, so Linux only).
func TestCloseReleasesEveryFile(t *testing.T) {
	dir := testTempDir(t)
	l, err := Open(Config{Path: filepath.Join(dir, "audit.log"), MaxSize: 1, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		l.CellDone(cell(i))
	}
	if open := openFDs(t, dir); open != 1 {
		t.Fatalf("%d files open in the log's directory before Close, want 1 (the live log)", open)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if open := openFDs(t, dir); open != 0 {
		t.Fatalf("%d files open in the log's directory after Close, want 0", open)
	}
}
