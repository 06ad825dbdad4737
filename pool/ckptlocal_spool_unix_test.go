//go:build unix

package pool

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The local store keeps a spool file the pool wrote in the owner's dir as
// it is (renamed into place, not copied): a save's bytes are written once.
// Windows copies it (no rename of a file its writer holds open).
func TestLocalStorePutRenamesItsOwnSpoolFile(t *testing.T) {
	l, err := newLocalStore(testTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("a", 32) + "/" + strings.Repeat("b", 64)
	dir := filepath.Join(l.dir, strings.Repeat("a", 32))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("state"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	spooled, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Put(t.Context(), name, 1, f, 5); err != nil {
		t.Fatal(err)
	}
	stored, err := os.Stat(l.path(name, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(spooled, stored) {
		t.Fatalf("the stored generation is a copy of the spool file, not the file itself")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the owner's dir, want the one generation", len(entries))
	}
}

// Delete reports a generation it could not remove (here a non-empty
// directory in a generation's place) and still removes the others.
func TestLocalStoreDeleteReportsWhatStays(t *testing.T) {
	l, err := newLocalStore(testTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("c", 32) + "/" + strings.Repeat("d", 64)
	if err := l.Put(t.Context(), name, 1, strings.NewReader("one"), 3); err != nil {
		t.Fatal(err)
	}
	stuck := l.path(name, 2)
	if err := os.MkdirAll(filepath.Join(stuck, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(t.Context(), name, 2); err == nil {
		t.Fatal("Delete = nil with generation 2 still in place")
	}
	if _, err := os.Stat(l.path(name, 1)); !os.IsNotExist(err) {
		t.Fatalf("generation 1 after Delete: %v, want it gone", err)
	}
}
