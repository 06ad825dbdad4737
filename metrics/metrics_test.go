package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernpool/kernpool/pool"
)

func TestObserverSeries(t *testing.T) {
	m := New("v1.2.3", "abc", []string{"default", "untrusted"})
	m.KernelStarted("default")
	m.KernelStarted("default")
	m.KernelEnded("default", pool.EndOOM)
	// A listing's OOM kill: a kernel ended for "oom" with no cell event.
	m.KernelStarted("untrusted")
	m.KernelEnded("untrusted", pool.EndOOM)
	m.SparesChanged("untrusted", 1)
	m.SparesChanged("untrusted", 1)
	m.SparesChanged("untrusted", -1)
	m.Refused("default", pool.RefusedQuota)
	m.CellDone(&pool.CellEvent{Owner: "alice", KernelID: "k1", Mode: "default", Code: "secret_code()",
		Status: pool.StatusError, Duration: 2 * time.Second, OOMKilled: true,
		ToolOutcomes: map[pool.ToolOutcome]int{pool.ToolOK: 2, pool.ToolError: 1},
		OutputBytes:  10, DroppedBytes: 4, BetweenCellsBytes: 5, SpillBytes: 7, Redactions: 3, ReplyBytes: 2048})
	m.AuditWriteFailed()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(strings.NewReader(body)); err != nil {
		t.Fatalf("not the text format: %v", err)
	}
	for _, line := range []string{
		`kernpool_kernels_live{mode="default"} 1`,
		`kernpool_kernels_live{mode="untrusted"} 0`,
		`kernpool_kernels_spare{mode="default"} 0`,
		`kernpool_kernels_spare{mode="untrusted"} 1`,
		`kernpool_kernel_starts_total{mode="default"} 2`,
		`kernpool_kernel_ends_total{mode="default",reason="oom"} 1`,
		`kernpool_kernel_ends_total{mode="untrusted",reason="lru"} 0`,
		`kernpool_cells_total{mode="default",status="error"} 1`,
		`kernpool_cells_total{mode="default",status="success"} 0`,
		`kernpool_oom_kills_total{mode="default"} 1`,
		`kernpool_oom_kills_total{mode="untrusted"} 1`,
		`kernpool_refusals_total{reason="quota"} 1`,
		`kernpool_refusals_total{reason="capacity"} 0`,
		`kernpool_tool_calls_total{outcome="ok"} 2`,
		`kernpool_tool_calls_total{outcome="error"} 1`,
		`kernpool_output_bytes_total 10`,
		`kernpool_dropped_bytes_total 4`,
		`kernpool_output_between_cells_dropped_bytes_total 5`,
		`kernpool_spill_bytes_total 7`,
		`kernpool_redactions_total 3`,
		`kernpool_audit_write_failures_total 1`,
		`kernpool_kernel_daemon_memory_bytes_sum 2048`,
		`kernpool_cell_duration_seconds_sum{mode="default"} 2`,
		`kernpool_build_info{revision="abc",version="v1.2.3"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("missing %s", line)
		}
	}
	if strings.Contains(body, "alice") || strings.Contains(body, "secret_code") || strings.Contains(body, `"k1"`) {
		t.Error("an owner, code or kernel id became a label value")
	}
}

// The sandbox series exist at zero before a source is wired, then show
// what it reports at each scrape.
func TestSandboxSeries(t *testing.T) {
	m := New("v", "r", nil)
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	for _, line := range []string{`kernpool_uid_scrubs_total 0`, `kernpool_host_paths{kind="private"} 0`} {
		if !strings.Contains(scrape(), line+"\n") {
			t.Errorf("before WatchSandboxes: missing %s", line)
		}
	}
	st := pool.SandboxStats{UIDScrubs: 3, ScrubRemoved: 100010, ScrubBounded: 1, ScrubErrors: 2,
		HostPathsPrivate: 5, HostPathsReadOnly: 1, HostPathDirs: 4000, HostPathWalk: 1500 * time.Millisecond}
	m.WatchSandboxes(func() pool.SandboxStats { return st })
	body := scrape()
	for _, line := range []string{
		`kernpool_uid_scrubs_total 3`,
		`kernpool_uid_scrub_removed_entries_total 100010`,
		`kernpool_uid_scrub_bounded_total 1`,
		`kernpool_uid_scrub_errors_total 2`,
		`kernpool_host_paths{kind="private"} 5`,
		`kernpool_host_paths{kind="read_only"} 1`,
		`kernpool_host_path_walk_dirs 4000`,
		`kernpool_host_path_walk_seconds 1.5`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("missing %s", line)
		}
	}
}
