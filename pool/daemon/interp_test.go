//go:build unix

package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestResolveInterpreter(t *testing.T) {
	testenv.RequirePython(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shim := write("shim", "#!/bin/sh\nexec "+testenv.Python+" \"$@\"\n")
	broken := write("broken", "#!/bin/sh\necho nope >&2\nexit 1\n")
	liar := write("liar", "#!/bin/sh\necho relative/python\n")
	loop := write("loop", "#!/bin/sh\necho "+filepath.Join(dir, "shim")+"\n")
	pathDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(pathDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shim, filepath.Join(pathDir, "python3")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", pathDir)

	tests := []struct {
		name, configured, want string
		wantErr                bool
	}{
		{"native binary kept", testenv.Python, testenv.Python, false},
		{"shim resolved", shim, testenv.Python, false},
		{"python3 on PATH resolved", "", testenv.Python, false},
		{"broken shim kept", broken, broken, false},
		{"relative answer refused", liar, liar, false},
		{"script answer refused", loop, loop, false},
		{"missing", filepath.Join(dir, "absent"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveInterpreter(context.Background(), tt.configured, hclog.NewNullLogger())
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("resolveInterpreter(%q) = %q, %v; want %q (error %t)", tt.configured, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestUsableInterpreterFallsBack(t *testing.T) {
	testenv.RequirePython(t)
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{first, second} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// first/python3 is a shim to a "private" python; second/python3 the real one.
	private := filepath.Join(dir, "private-python")
	if err := os.Symlink(testenv.Python, private); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(first, "python3"), []byte("#!/bin/sh\nexec "+testenv.Python+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.Python, filepath.Join(second, "python3")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "relative/bin"+string(os.PathListSeparator)+first+string(os.PathListSeparator)+second)
	refuse := func(bad string) func(string) error {
		return func(p string) error {
			if p == bad {
				return errors.New("uid 60000 cannot search " + p)
			}
			return nil
		}
	}
	refuseAll := func(bad ...string) func(string) error {
		return func(p string) error {
			for _, b := range bad {
				if p == b {
					return errors.New("uid 60000 cannot search " + p)
				}
			}
			return nil
		}
	}
	log := hclog.NewNullLogger()
	tests := []struct {
		name       string
		interp     string
		configured bool
		check      func(string) error
		want       string
		wantErr    bool
	}{
		{"usable kept", private, false, refuse("/nowhere"), private, false},
		{"replaced by a shim's target", private, false, refuse(private), testenv.Python, false},
		{"replaced by a later PATH entry", private, false, refuseAll(private, testenv.Python), filepath.Join(second, "python3"), false},
		{"configured never replaced", private, true, refuse(private), "", true},
		{"nothing usable", testenv.Python, false, func(string) error { return errors.New("no") }, "", true},
		{"no check", private, false, nil, private, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := usableInterpreter(context.Background(), tt.interp, tt.configured, tt.check, log)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Fatalf("usableInterpreter = %q, %v; want %q (error %t)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
