//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestResolveInterpreter(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shim := write("shim", "#!/bin/sh\nexec "+python+" \"$@\"\n")
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
		{"native binary kept", python, python, false},
		{"shim resolved", shim, python, false},
		{"python3 on PATH resolved", "", python, false},
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
