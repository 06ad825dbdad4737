package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestResolveInitPath: the daemon runs kernpool-init from beside its own
// binary only when it is a regular file its owner can execute, owned by
// root or the daemon's user, that nobody else can write (anyone who can
// replace it runs code as root in every kernel's init); otherwise it
// re-executes itself. A configured path is taken as it is.
func TestResolveInitPath(t *testing.T) {
	defer func(f func() (string, error)) { executable = f }(executable)
	cases := []struct {
		name string
		make func(t *testing.T, path string) // creates path (kernpool-init); nil: none
		root bool                            // make needs root (chown)
		want bool                            // path is the init
	}{
		{"regular 0755", initFile(0o755, -1), false, true},
		{"owner-executable 0700", initFile(0o700, -1), false, true},
		{"missing", nil, false, false},
		{"a directory", func(t *testing.T, p string) { mustOK(t, os.Mkdir(p, 0o755)) }, false, false},
		{"group-writable", initFile(0o775, -1), false, false},
		{"world-writable", initFile(0o757, -1), false, false},
		{"not executable by its owner", initFile(0o655, -1), false, false},
		{"owned by another user", initFile(0o755, 4321), true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			dir := testTempDir(t)
			init := filepath.Join(dir, InitBinary)
			if c.make != nil {
				c.make(t, init)
			}
			executable = func() (string, error) { return filepath.Join(dir, "kernpoold"), nil }
			want := DefaultInitPath
			if c.want {
				want = init
			}
			if got := ResolveInitPath(""); got != want {
				t.Errorf("ResolveInitPath(\"\") = %q, want %q", got, want)
			}
			if got := ResolveInitPath("/opt/init"); got != "/opt/init" {
				t.Errorf("ResolveInitPath(configured) = %q, want /opt/init", got)
			}
		})
	}
	t.Run("own binary unknown", func(t *testing.T) {
		executable = func() (string, error) { return "", errors.New("no /proc") }
		if got := ResolveInitPath(""); got != DefaultInitPath {
			t.Errorf("ResolveInitPath(\"\") = %q, want %q", got, DefaultInitPath)
		}
	})
}

// initFile makes a regular file of mode (chmod, past the umask), owned by uid
// (-1: the test's user).
func initFile(mode os.FileMode, uid int) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		mustOK(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600))
		if uid >= 0 {
			mustOK(t, os.Chown(p, uid, uid))
		}
		mustOK(t, os.Chmod(p, mode))
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCloseInitClosesBothEnds: closing a sandbox's init step (Release,
// or a restart of its Prepare) closes the status pipe's read end and the
// init's write end if the daemon still holds it: one pipe per kernel start
// would leak otherwise.
func TestCloseInitClosesBothEnds(t *testing.T) {
	for _, keepWrite := range []bool{true, false} {
		r, w, err := os.Pipe()
		mustOK(t, err)
		st := &initStep{status: r}
		if keepWrite {
			st.write = w
		} else {
			mustOK(t, w.Close())
		}
		s := &Sandbox{init: st}
		s.closeInit()
		for name, f := range map[string]*os.File{"read end": r, "write end": w} {
			if err := f.Close(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("write end held %t: the %s is still open (Close: %v)", keepWrite, name, err)
			}
		}
		if st.status != nil || st.write != nil {
			t.Errorf("write end held %t: the init step still names its pipe", keepWrite)
		}
	}
}
