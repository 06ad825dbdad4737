package isolate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestProbeInitFailsClosed: ProbeInit, what serve and doctor ask before
// any kernel starts, says the init step works only when the init it is
// given ran and reported every confinement: "" is the default init, any
// other path is that binary, and an init that reports ready but then exits
// with a failure fails the probe (it did not finish its checks).
func TestProbeInitFailsClosed(t *testing.T) {
	testenv.RequireRoot(t)
	// Reports every namespace and the filter in force, then fails.
	fake := filepath.Join(testTempDir(t), "fake-init")
	script := "#!/bin/sh\nprintf 'ready 0 ns=mnt,pid,ipc,uts,net seccomp=1\\n' >&3\necho fake init failed >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// An empty first line: the report is the first line, and that one is none.
	empty := filepath.Join(testTempDir(t), "empty-init")
	script = "#!/bin/sh\nprintf '\\nready 0 ns=mnt,pid,ipc,uts,net seccomp=1\\n' >&3\n"
	if err := os.WriteFile(empty, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string
	}{
		{"default init", "", ""},
		{"not an init", "/bin/true", "no report from the init"},
		{"ready then exit 3", fake, "exit status 3"},
		{"empty first line", empty, `unexpected report ""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ProbeInit(context.Background(), c.path)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("ProbeInit(%q): %v", c.path, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("ProbeInit(%q) = %v, want an error saying %q", c.path, err, c.want)
			}
		})
	}
}
