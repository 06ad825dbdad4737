//go:build integration && linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestExtraFDs: fd numbers are ignored, socket/pipe inodes are ignored,
// anything beyond the baseline's multiset is reported.
func TestExtraFDs(t *testing.T) {
	cases := []struct {
		name       string
		base, now  []string
		wantExtras []string
	}{
		{"same", []string{"3 -> /dev/null", "4 -> socket:[1]"}, []string{"5 -> socket:[9]", "3 -> /dev/null"}, nil},
		{"new file", []string{"3 -> /dev/null"}, []string{"3 -> /dev/null", "7 -> /tmp/x"}, []string{"7 -> /tmp/x"}},
		{"one more socket", []string{"4 -> socket:[1]"}, []string{"4 -> socket:[1]", "8 -> socket:[2]"}, []string{"8 -> socket:[2]"}},
		{"fewer", []string{"3 -> /a", "4 -> /b"}, []string{"3 -> /a"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := extraFDs(tc.base, tc.now); !reflect.DeepEqual(got, tc.wantExtras) {
				t.Fatalf("extraFDs = %v, want %v", got, tc.wantExtras)
			}
		})
	}
}

// TestLeakCheckerFindsPlantedProcess: a process whose environment names a
// daemon's state dir (as every kernel process does through TMPDIR) is
// reported with its pid and command line, and killLeaks ends it; a staging
// dir left behind is reported too. Proves the checker can fail.
func TestLeakCheckerFindsPlantedProcess(t *testing.T) {
	base := t.TempDir()
	d := &Daemon{t: t, Base: base, State: filepath.Join(base, "state"), Log: filepath.Join(base, "log"),
		ids: map[string]bool{}, uids: map[int]bool{}}
	staging := filepath.Join(d.State, "kernels", "k0123456789abcdef")
	if err := os.MkdirAll(filepath.Join(staging, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Env = []string{"TMPDIR=" + filepath.Join(staging, "tmp")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() { _ = cmd.Process.Kill(); <-done }()

	l := d.scan(false)
	if len(l.pids) != 1 || l.pids[0] != cmd.Process.Pid {
		t.Fatalf("planted pid %d not found: %s", cmd.Process.Pid, l)
	}
	if !strings.Contains(l.String(), "/bin/sleep 300") || !strings.Contains(l.String(), staging) {
		t.Fatalf("report lacks the command line or the staging dir:\n%s", l)
	}
	d.killLeaks(l)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("killLeaks did not end the planted process")
	}
}
