package pool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/integration/wine/wintest"
	"github.com/kernpool/kernpool/internal/testenv"
)

// spillPool is a Pool with only what the spill dir code uses: its state
// dir and a logger writing to logs.
func spillPool(t *testing.T, logs *testenv.SyncBuffer) *Pool {
	t.Helper()
	return &Pool{cfg: Config{StateDir: testTempDir(t)}, log: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})}
}

// mkSpill creates <state>/spill/<id>/<file> (file "": the dir only).
func mkSpill(t *testing.T, p *Pool, id, file string) string {
	t.Helper()
	dir := p.spillDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if file != "" {
		if err := os.WriteFile(filepath.Join(dir, file), []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Removing spill dirs that can be removed (a previous daemon's at start,
// a kernel's at teardown, or one that is already gone) warns of nothing:
// the warnings are for the dirs left behind only.
func TestSpillRemovalWarnsOfNothing(t *testing.T) {
	if wintest.OnWine() {
		t.Skip("Wine cannot remove a file through os.RemoveAll (unlinkat: Invalid function; integration/wine/README.md)")
	}
	var logs testenv.SyncBuffer
	p := spillPool(t, &logs)
	stale := []string{mkSpill(t, p, "kaaaa", "cell_000001_stdout.txt"), mkSpill(t, p, "kbbbb", "")}
	if err := p.prepareSpillRoot(); err != nil {
		t.Fatal(err)
	}
	live := mkSpill(t, p, "kcccc", "cell_000001_stdout.txt")
	p.removeSpillDir("kcccc")
	p.removeSpillDir("kgone")
	for _, dir := range append(stale, live) {
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s survived: %v", dir, err)
		}
	}
	if logs.String() != "" {
		t.Fatalf("logged %q, want nothing", logs.String())
	}
}
