package overlay

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesTheFileWithTheMutant(t *testing.T) {
	dir := t.TempDir()
	path, err := Write(dir, "/repo/pkg/a.go", []byte("package a // mutant\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("overlay %s: %v", b, err)
	}
	want := filepath.Join(dir, "a.go")
	if len(o.Replace) != 1 || o.Replace["/repo/pkg/a.go"] != want {
		t.Fatalf("Replace = %v, want only /repo/pkg/a.go -> %s", o.Replace, want)
	}
	if got, _ := os.ReadFile(want); string(got) != "package a // mutant\n" {
		t.Fatalf("mutant file holds %q", got)
	}
}

func TestRepoRootHoldsGoMod(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "mutate", "overlay", "doc.go")); err != nil {
		t.Fatalf("RepoRoot = %s: %v", root, err)
	}
}
