package pool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// immutable makes path immutable (chattr +i: not even root may unlink
// it) until the test ends, or skips the test where that is impossible.
func immutable(t *testing.T, path string) {
	t.Helper()
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr")
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("chattr +i %s: %v %s", path, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", path).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v %s", path, err, out)
		}
	})
}

// A spill dir that cannot be removed is warned of, once, by name, at
// start (which goes on, and still removes the other stale dirs) and at
// teardown.
func TestSpillLeftBehindIsWarnedOf(t *testing.T) {
	var logs testenv.SyncBuffer
	p := spillPool(t, &logs)
	gone := mkSpill(t, p, "kaaaa", "cell_000001_stdout.txt")
	stuck := mkSpill(t, p, "kbbbb", "cell_000001_stdout.txt")
	immutable(t, filepath.Join(stuck, "cell_000001_stdout.txt"))
	if err := p.prepareSpillRoot(); err != nil {
		t.Fatalf("a stale dir left behind failed the start: %v", err)
	}
	if _, err := os.Lstat(gone); !os.IsNotExist(err) {
		t.Fatalf("the removable stale dir survived: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "[WARN]  stale spill dir not removed: name=kbbbb") || !strings.Contains(lines[0], "operation not permitted") {
		t.Fatalf("start logged %q, want one warning naming kbbbb", logs.String())
	}
	p.removeSpillDir("kbbbb")
	lines = strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "[WARN]  spill dir not removed: id=kbbbb") || !strings.Contains(lines[1], "operation not permitted") {
		t.Fatalf("teardown logged %q, want a second warning naming kbbbb", logs.String())
	}
}
