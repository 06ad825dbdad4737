//go:build windows

package wintest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"
)

// OnWine reports whether the test binary runs under Wine rather than a real
// Windows: ntdll exports wine_get_version only there.
func OnWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// TempDir is tb.TempDir, except under Wine, where os.RemoveAll fails
// ("unlinkat: Invalid function") and t.TempDir's cleanup would fail every
// test: there the directory is removed entry by entry, which Wine supports.
func TempDir(t testing.TB) string {
	t.Helper()
	if !OnWine() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "kernpool-test-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() {
		if err := removeTree(dir); err != nil {
			t.Errorf("temp dir cleanup: %v", err)
		}
	})
	return dir
}

// removeTree removes path and everything below it one entry at a time.
func removeTree(path string) error {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := removeTree(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
