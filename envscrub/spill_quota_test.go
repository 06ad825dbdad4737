package envscrub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/integration/wine/wintest"
)

// TestSpillQuotaRemovesSeveralAtOnce: one large spill after four small
// ones puts the directory 70 bytes over its quota, which takes the three
// oldest files to undo, and the warning says nothing of a failure: every
// removal succeeded. (gremlins: a quota pass that reported its first
// successful removal as a failure, and stopped there, lived: each spill
// of the other quota test needs one removal.)
func TestSpillQuotaRemovesSeveralAtOnce(t *testing.T) {
	if wintest.OnWine() {
		t.Skip("Wine cannot remove a file through an os.Root (removeat: Invalid function)")
	}
	f := NewPipeline(OutputConfig{InlineCap: 10, SpillCap: 100, SpillQuota: 150}).Filter(nil)
	dir := filepath.Join(testTempDir(t), "spill")
	for cell := 1; cell <= 5; cell++ {
		text := strings.Repeat("x", 30) // spilled whole: 30 bytes
		if cell == 5 {
			text = strings.Repeat("y", 1000) // spilled up to its cap: 100 bytes
		}
		out, err := f.Finish(text, "", dir, cell)
		if err != nil || out.SpillPath == "" {
			t.Fatalf("cell %d: %+v %v", cell, out, err)
		}
		if strings.Contains(out.Warning, "could not be removed") {
			t.Errorf("cell %d: warning %q reports a failed removal", cell, out.Warning)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, " "), "cell_000004_stdout.txt cell_000005_stdout.txt"; got != want {
		t.Fatalf("spill dir holds %s, want %s", got, want)
	}
}
