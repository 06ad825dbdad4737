package audit

import (
	"errors"
	"os"
	"path/filepath"
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
