package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// TestExcludesBuildConstraints: gremlins is told to leave out exactly the
// sources this system's build does (by build constraint, whatever the
// name: a `unix && !linux` file on Linux) and the subpackages, never a
// file the build compiles or a test file.
func TestExcludesBuildConstraints(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the expected build is Linux's")
	}
	root := t.TempDir()
	files := map[string]string{
		"go.mod":               "module m\n\ngo 1.22\n",
		"p/p.go":               "package p\n",
		"p/p_linux.go":         "package p\n",
		"p/sandbox_unix.go":    "//go:build unix && !linux\n\npackage p\n",
		"p/sandbox_windows.go": "package p\n",
		"p/tagged.go":          "//go:build never\n\npackage p\n",
		"p/p_windows_test.go":  "package p\n",
		"p/sub/s.go":           "package sub\n",
	}
	for name, src := range files {
		mustWrite(t, filepath.Join(root, name), src)
	}
	info, err := listPkg(root, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	var res []*regexp.Regexp
	for _, e := range info.excludes() {
		res = append(res, regexp.MustCompile(e))
	}
	for path, want := range map[string]bool{
		"p.go": false, "p_linux.go": false, "sandbox_unix.go": true, "sandbox_windows.go": true,
		"tagged.go": true, "sub/s.go": true, "xsandbox_unix.go": false, "sandbox_unix_go": false,
	} {
		got := false
		for _, re := range res {
			got = got || re.MatchString(path) // gremlins' rule: any -E matching the path
		}
		if got != want {
			t.Errorf("%s excluded: %t, want %t (excludes %q)", path, got, want, info.excludes())
		}
	}
	if n := len(info.excludes()); n != 4 {
		t.Errorf("%d excludes %q, want 4: the subpackages and the 3 files the build leaves out", n, info.excludes())
	}
}

func mustWrite(t *testing.T, path, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}
