package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestDoctorReport: `kernpool doctor`'s report says whose settings it
// prints, what the interpreter resolves to, and whether (and why not)
// it probed the isolation; ok is false only when the isolation or the
// interpreter the config asks for cannot be had.
func TestDoctorReport(t *testing.T) {
	live := &api.Settings{Socket: "/run/kp/kp.sock", StateDir: "/var/lib/kp", Interpreter: "/opt/py/bin/python3", Isolation: "sandbox",
		MaxKernels: 7, MaxToolCalls: 3, Profiles: map[string]api.ProfileSettings{"default": {MemoryMax: 256 << 20, PidsMax: 64}}}
	tests := []struct {
		name    string
		root    bool                                 // kernel uids exist only when root
		set     func(t *testing.T, c *daemon.Config) // adjusts testConfig
		live    *api.Settings
		ok      bool
		want    []string
		notWant []string
	}{
		{name: "a running daemon's settings", live: live, ok: true, want: []string{
			"settings:     the running daemon's (GET /v1/settings on ",
			"interpreter:  /opt/py/bin/python3 (the daemon's default)\n",
			"socket:       /run/kp/kp.sock\n", "state dir:    /var/lib/kp\n",
			"kernels:      max 7, tool calls per cell 3\n",
			"swap none, pids 64,", "preload none,",
			"isolation:    not probed: a daemon is running",
		}, notWant: []string{"no daemon answered", "kernel python:"}},
		{name: "probed with this command's settings", ok: true, set: func(t *testing.T, c *daemon.Config) {
			p := c.Profiles[daemon.DefaultProfile]
			p.Preload = []string{"json", "math"}
			c.Profiles[daemon.DefaultProfile] = p
		}, want: []string{
			"settings:     this command's flags and config file (no daemon answered)\n",
			"interpreter:  resolves to " + testenv.Python + "\n",
			"preload json,math,", "kernel python:     " + testenv.Python + "\n",
		}, notWant: []string{"not probed", "NOT FOUND"}},
		{name: "no interpreter", ok: true, set: func(t *testing.T, c *daemon.Config) {
			c.Interpreter = filepath.Join(testTempDir(t), "no-python")
		}, want: []string{"settings:     this command's flags", "interpreter:  NOT FOUND: "}, notWant: []string{"kernel python:"}},
		{name: "state dir cannot be made", ok: false, set: func(t *testing.T, c *daemon.Config) {
			file := filepath.Join(testTempDir(t), "file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			c.StateDir = filepath.Join(file, "state")
		}, want: []string{"isolation:    cannot prepare the state dir to probe: "}},
		// A python3 in a dir kernel uids cannot search: configured, it is
		// refused; found first on PATH, the next usable one is taken.
		{name: "configured interpreter unusable by kernel uids", root: true, ok: false, set: func(t *testing.T, c *daemon.Config) {
			c.Interpreter = privatePython(t)
		}, want: []string{"kernel python:     UNUSABLE by kernel uids: "}},
		{name: "first python3 on PATH unusable by kernel uids", root: true, ok: true, set: func(t *testing.T, c *daemon.Config) {
			t.Setenv("PATH", filepath.Dir(privatePython(t))+string(os.PathListSeparator)+filepath.Dir(testenv.Python))
			c.Interpreter = ""
		}, want: []string{"kernel python:     " + testenv.Python + "\n"}, notWant: []string{"UNUSABLE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				testenv.RequireRoot(t)
			}
			cfg := testConfig(t)
			if tt.set != nil {
				tt.set(t, cfg)
			}
			report, ok := daemon.Doctor(context.Background(), cfg, tt.live, "v1.2.3")
			if ok != tt.ok {
				t.Errorf("ok = %t, want %t", ok, tt.ok)
			}
			for _, w := range append(tt.want, "kernpool v1.2.3 (") {
				if !strings.Contains(report, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(report, w) {
					t.Errorf("report has %q", w)
				}
			}
			if t.Failed() {
				t.Logf("report:\n%s", report)
			}
		})
	}
}

// TestDoctorBesideADaemon: doctor never probes (sweeps) the isolation
// of a state dir a daemon holds, even when that daemon did not answer.
func TestDoctorBesideADaemon(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Shutdown(ctx) }()
	report, ok := daemon.Doctor(ctx, cfg, nil, "v1")
	if !ok || !strings.Contains(report, "isolation:    not probed: another kernpool is serving on the state dir") || strings.Contains(report, "kernel python:") {
		t.Errorf("doctor beside a daemon: ok %t, report:\n%s", ok, report)
	}
}

// privatePython is a python3 (a link to the test's) in a dir only root
// may search.
func privatePython(t *testing.T) string {
	dir := filepath.Join(testTempDir(t), "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(dir, "python3")
	if err := os.Symlink(testenv.Python, py); err != nil {
		t.Fatal(err)
	}
	return py
}
