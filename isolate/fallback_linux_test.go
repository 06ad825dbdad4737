package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// Without cgroups, a root daemon still kills escaped descendants: each
// kernel has a uid of its own, and Kill takes every process of it.
func TestFallbackWithoutCgroupsStillKillsEscapes(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	iso := newIso(t, func(c *Config) { c.CgroupEnabled, c.Isolation = false, kernel.IsolationProcess })
	r := iso.Report()
	if r.CgroupActive || !strings.Contains(r.Warning(), "memory, pids and cpu limits") {
		t.Fatalf("report = %+v, warning %q", r, r.Warning())
	}
	k, sb := startKernel(t, iso, "alice", "default", Limits{})
	run(t, k, escapeCell)
	pids := procUIDs()[sb.UID()]
	if len(pids) < 3 {
		t.Fatalf("uid %d runs %v, want the kernel and two escapees", sb.UID(), pids)
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, iso, sb.ID(), pids)
	if st, err := sb.Stats(); err != nil || st != (kernel.Stats{}) {
		t.Errorf("stats without a cgroup = %+v, %v", st, err)
	}
}

// An unmarked group where the parent should be: sandbox mode refuses to
// start (limits could not be applied), process mode falls back; neither
// touches the group.
func TestForeignParentFallsBackAndIsUntouched(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid)
	name := testParent(t)
	dir := filepath.Join("/sys/fs/cgroup/pids", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	cfg := DefaultConfig(stateDir(t))
	cfg.CgroupParent = "/" + name
	if iso, err := New(cfg); !errors.Is(err, ErrIsolation) || !strings.Contains(err.Error(), "memory, pids and cpu limits") {
		if iso != nil {
			iso.Close()
		}
		t.Fatalf("sandbox mode: New = %v, want ErrIsolation naming the limits", err)
	}
	iso := newIso(t, func(c *Config) { c.CgroupParent, c.Isolation = "/"+name, kernel.IsolationProcess })
	r := iso.Report()
	if r.CgroupActive || !strings.Contains(r.CgroupReason, "not marked") {
		t.Fatalf("report = %+v", r)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("foreign group touched: %v", err)
	}
}

func TestCheckAccess(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(c *Config) { c.CgroupEnabled, c.Isolation = false, kernel.IsolationProcess })
	private := t.TempDir() // 0700 root: no kernel uid may enter
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(stateDir(t), "py")
	if err := os.WriteFile(script, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, interp, cwd, mention string
	}{
		{"ok", testenv.Python, "/tmp", ""},
		{"relative interpreter", "python3", "", "absolute"},
		{"missing interpreter", "/nonexistent/python3", "", "does not exist"},
		{"interpreter not executable by uid", script, "", "cannot execute"},
		{"cwd not enterable", testenv.Python, private, "cannot search " + private},
		{"the fix is named", testenv.Python, private, "run: chmod o+x " + private},
		{"cwd is a file", testenv.Python, testenv.Python, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := iso.CheckAccess(c.interp, c.cwd)
			if c.mention == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrAccess) || !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("CheckAccess = %v, want ErrAccess mentioning %q", err, c.mention)
			}
		})
	}
}
