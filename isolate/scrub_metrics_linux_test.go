package isolate

import (
	"bufio"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/metrics"
)

// TestScrubAndHostPathFiguresOnMetrics: real scrubs at real uid leases
// move each scrub series of the daemon's /metrics by exactly what they did
// (entries removed, a bound hit, an error met), and the start's walk for
// kernel-writable host paths shows its figures there.
func TestScrubAndHostPathFiguresOnMetrics(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	const uid = 61990
	dir := scrubTestDir(t)
	// A scrub dir that is a file: every scrub meets an error there, and
	// goes on with the next dir.
	notDir := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	iso := newIso(t, func(c *Config) {
		c.RunAsUser, c.UIDRange = true, [2]int{uid, uid}
		c.UIDLockDir = filepath.Join(t.TempDir(), "uids")
		c.ScrubDirs = []string{notDir, dir}
	})
	m := metrics.New("test", "", nil)
	m.WatchSandboxes(iso.SandboxStats)
	lease := func() {
		t.Helper()
		sb, err := iso.reserve(kernelID(t), "alice", "default", Limits{})
		if err != nil {
			t.Fatalf("lease: %v", err)
		}
		_ = sb.Kill()
		if _, err := sb.Release(); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	flood(t, dir, uid, scrubMaxRemoved+10)
	lease() // stops at the bound; the file dir fails
	wantSeries(t, m, map[string]float64{
		"kernpool_uid_scrubs_total": 1, "kernpool_uid_scrub_removed_entries_total": scrubMaxRemoved,
		"kernpool_uid_scrub_bounded_total": 1, "kernpool_uid_scrub_errors_total": 1,
	})
	lease() // removes the last 10; the file dir fails again
	wantSeries(t, m, map[string]float64{
		"kernpool_uid_scrubs_total": 2, "kernpool_uid_scrub_removed_entries_total": scrubMaxRemoved + 10,
		"kernpool_uid_scrub_bounded_total": 1, "kernpool_uid_scrub_errors_total": 2,
	})
	if got := countEntries(t, dir); got != 0 {
		t.Errorf("%d entries left", got)
	}
	rep := iso.Report()
	want := map[string]float64{
		`kernpool_host_paths{kind="private"}`:   float64(len(rep.PrivatePaths)),
		`kernpool_host_paths{kind="read_only"}`: float64(len(rep.ReadOnlyPaths)),
	}
	got := wantSeries(t, m, want)
	t.Logf("host paths: %d private, %d read-only; walk: %v dirs in %v s", len(rep.PrivatePaths), len(rep.ReadOnlyPaths),
		got["kernpool_host_path_walk_dirs"], got["kernpool_host_path_walk_seconds"])
	if len(rep.PrivatePaths) > 0 && (got["kernpool_host_path_walk_dirs"] < float64(len(rep.PrivatePaths)) || got["kernpool_host_path_walk_seconds"] <= 0) {
		t.Errorf("host-path walk figures: %v dirs in %v s for %d private paths", got["kernpool_host_path_walk_dirs"], got["kernpool_host_path_walk_seconds"], len(rep.PrivatePaths))
	}
}

// wantSeries scrapes m, checks each series in want has its value, and
// returns every kernpool sample it read.
func wantSeries(t *testing.T, m *metrics.Metrics, want map[string]float64) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]float64{}
	for sc := bufio.NewScanner(rec.Body); sc.Scan(); {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "kernpool_") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			got[name] = v
		}
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
	return got
}
