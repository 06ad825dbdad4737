package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckMerge: a merging profile is refused (ErrUnsupported) unless the
// host has KSM's knobs and knows the per-process switch, and the doctor
// line says whether ksmd runs; without a merging profile nothing is
// asked.
func TestCheckMerge(t *testing.T) {
	einval := func() error { return unix.EINVAL }
	ok := func() error { return nil }
	cases := []struct {
		name     string
		merge    bool
		run      string // "" = no run file
		prctl    func() error
		wantErr  bool
		wantLine string
	}{
		{"no merging profile", false, "", einval, false, ""},
		{"no KSM", true, "", ok, true, ""},
		{"KSM without the prctl (Linux 6.1)", true, "1", einval, true, ""},
		{"ksmd runs", true, "1", ok, false, "ksmd runs (pages_sharing 42)"},
		{"ksmd off", true, "0", ok, false, "ksmd is OFF"},
	}
	defer func(d string, p func() error) { ksmDir, mergePrctl = d, p }(ksmDir, mergePrctl)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ksmDir, mergePrctl = testTempDir(t), c.prctl
			if c.run != "" {
				for name, v := range map[string]string{"run": c.run, "pages_sharing": "42"} {
					if err := os.WriteFile(filepath.Join(ksmDir, name), []byte(v+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			cfg := Config{Profiles: map[string]Profile{"default": {}, "merge": {MemoryMerge: c.merge}}}
			line, err := checkMerge(cfg)
			if c.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrUnsupported)) {
				t.Fatalf("checkMerge: %v; want an ErrUnsupported error: %t", err, c.wantErr)
			}
			if !strings.Contains(line, c.wantLine) || (c.wantLine == "") != (line == "") {
				t.Fatalf("doctor line %q, want one saying %q", line, c.wantLine)
			}
		})
	}
}

// TestMergePrctlKnownSinceLinux64: a kernel of 6.4 or later with KSM
// knows PR_GET_MEMORY_MERGE (the version comes from uname, not from the
// probe).
func TestMergePrctlKnownSinceLinux64(t *testing.T) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	major, rest, _ := strings.Cut(rel, ".")
	minor, _, _ := strings.Cut(rest, ".")
	maj, err1 := strconv.Atoi(major)
	mnr, err2 := strconv.Atoi(strings.TrimRightFunc(minor, func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		t.Skipf("kernel release %q: no version", rel)
	}
	if maj < 6 || maj == 6 && mnr < 4 {
		t.Skipf("Linux %s predates PR_GET_MEMORY_MERGE (6.4)", rel)
	}
	if _, err := os.Stat("/sys/kernel/mm/ksm/run"); err != nil {
		t.Skipf("no KSM on this host: %v", err)
	}
	if err := probeMergePrctl(); err != nil {
		t.Fatalf("Linux %s with KSM: probeMergePrctl: %v", rel, err)
	}
}
