package daemon_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// scrapeMetrics is GET /metrics on the handler's socket (serveHandler's),
// through the Go client.
func scrapeMetrics(t *testing.T, cfg *daemon.Config) string {
	t.Helper()
	c := api.NewClient(filepath.Join(filepath.Dir(cfg.StateDir), "own.sock"))
	defer c.CloseIdleConnections()
	var b strings.Builder
	if _, err := c.Metrics(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// auditLine is one line of the audit log, as docs/ops.md documents it.
type auditLine struct {
	Time       time.Time      `json:"time"`
	Owner      string         `json:"owner"`
	KernelID   string         `json:"kernel_id"`
	UID        int            `json:"uid"`
	Mode       string         `json:"mode"`
	CodeBytes  int            `json:"code_bytes"`
	CodeSHA256 string         `json:"code_sha256"`
	Code       *string        `json:"code"`
	Status     string         `json:"status"`
	Duration   string         `json:"duration"`
	Seconds    float64        `json:"duration_seconds"`
	ExitCode   int            `json:"exit_code"`
	OOMKilled  bool           `json:"oom_killed"`
	ToolCalls  map[string]int `json:"tool_calls"`
	Output     int64          `json:"output_bytes"`
	Redactions int            `json:"redactions"`
}

// TestCountersAndAuditFieldsMove: real cells through a wired daemon move
// every cell counter of docs/ops.md and every field of the audit line
// away from its zero value, to the figure the cells make: two successes,
// one error that exits the kernel, one timeout, a quota refusal, tool
// calls that succeed and fail, a planted secret, output past the inline
// cap (dropped, spilled), and a cell killed at its memory limit (root).
func TestCountersAndAuditFieldsMove(t *testing.T) {
	cfg := testConfig(t)
	cfg.Audit.Path, cfg.Audit.IncludeCode = filepath.Join(testTempDir(t), "audit.log"), true
	cfg.MaxKernelsPerOwner = 1
	withProfile(cfg, func(p *daemon.Profile) { p.Spares, p.MemoryMax = 0, 96<<20 })
	d, c, _ := reloadDaemon(t, cfg)
	ctx := context.Background()

	const secret = "sk-ant-api03-" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
	big := 60000 // past the inline cap of 50000: dropped from the result, whole in the spill
	calls := 0
	h := pool.ToolHandlerFunc(func(_ context.Context, call pool.ToolCall) (string, error) {
		calls++
		if calls == 2 {
			return "", errors.New("the tool failed")
		}
		return "ok", nil
	})
	first := "import kernpool_tools as t\nprint(t.search(q=1))\ntry:\n    t.search(q=2)\nexcept Exception:\n    pass\nprint('" + secret + "')\nprint('x' * " + itoa(big-1) + ")"
	res1, err := c.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"search"}, Code: first}, h)
	if err != nil || res1.Status != pool.StatusSuccess || strings.Contains(res1.Output, secret) {
		t.Fatalf("first cell: %+v, %v", res1, err)
	}
	// output_bytes counts after redaction: less than the raw stdout.
	wantOut := int64(len("ok\n") + len(secret) + 1 + big)
	res2, err := c.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"search"}, Code: "1"}, h)
	if err != nil || res2.Status != pool.StatusSuccess {
		t.Fatalf("second cell: %+v, %v", res2, err)
	}
	if _, err := c.Execute(ctx, pool.Request{Owner: "alice", Code: "1"}); !errors.Is(err, pool.ErrQuota) {
		t.Fatalf("a second kernel of alice over max_kernels_per_owner 1: %v, want a quota refusal", err)
	}
	slow, err := c.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"search"}, Timeout: 200 * time.Millisecond, Code: "import time\ntime.sleep(30)"}, h)
	if err != nil || slow.Status != pool.StatusTimeout {
		t.Fatalf("timeout cell: %+v, %v", slow, err)
	}
	exit, err := c.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"search"}, Code: "import sys\nsys.exit(3)"}, h)
	if err != nil || exit.ExitCode != 3 {
		t.Fatalf("sys.exit(3): %+v, %v", exit, err)
	}
	root := os.Geteuid() == 0
	var oom *pool.Result
	if root {
		oom, err = c.Execute(ctx, pool.Request{Owner: "bob", Code: "b = bytearray(400 << 20)"})
		if err != nil || !oom.Kernel.OOMKilled {
			t.Fatalf("a cell past memory_max: %+v, %v", oom, err)
		}
	}

	// Each status counts as the clients were told.
	statuses := map[pool.Status]int{}
	for _, r := range []*pool.Result{res1, res2, slow, exit, oom} {
		if r != nil {
			statuses[r.Status]++
		}
	}
	body := scrapeMetrics(t, cfg)
	want := map[string]string{
		`kernpool_cells_total{mode="default",status="success"}`:    itoa(statuses[pool.StatusSuccess]),
		`kernpool_cells_total{mode="default",status="timeout"}`:    "1",
		`kernpool_cells_total{mode="default",status="error"}`:      itoa(statuses[pool.StatusError]),
		`kernpool_kernel_ends_total{mode="default",reason="exit"}`: "1",
		`kernpool_kernel_ends_total{mode="default",reason="oom"}`:  itoa(b2i(root)),
		`kernpool_kernel_starts_total{mode="default"}`:             itoa(1 + b2i(root)),
		`kernpool_kernels_live{mode="default"}`:                    "0",
		`kernpool_oom_kills_total{mode="default"}`:                 itoa(b2i(root)),
		`kernpool_refusals_total{reason="quota"}`:                  "1",
		`kernpool_tool_calls_total{outcome="ok"}`:                  "1",
		`kernpool_tool_calls_total{outcome="error"}`:               "1",
		`kernpool_cell_duration_seconds_count{mode="default"}`:     itoa(4 + b2i(root)),
		`kernpool_kernel_daemon_memory_bytes_count`:                itoa(4 + b2i(root)),
	}
	got := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
	if got["kernpool_output_bytes_total"] == "0" || got["kernpool_dropped_bytes_total"] == "0" {
		t.Errorf("output %s, dropped %s bytes: want both moved", got["kernpool_output_bytes_total"], got["kernpool_dropped_bytes_total"])
	}

	if err := d.Shutdown(ctx); err != nil { // flushes the audit log
		t.Fatal(err)
	}
	lines := readAudit(t, cfg.Audit.Path)
	if len(lines) != 4+b2i(root) {
		t.Fatalf("%d audit lines, want one per settled cell (%d)", len(lines), 4+b2i(root))
	}
	a := lines[0]
	// The one secret is masked and counted once (the cell streamed), and
	// the whole redacted stdout is spilled: the counters say what the line says.
	if a.Redactions != 1 || got["kernpool_redactions_total"] != itoa(a.Redactions) || got["kernpool_spill_bytes_total"] != strconv.FormatInt(a.Output, 10) {
		t.Errorf("redactions %d (counter %s), output %d (spilled %s)", a.Redactions, got["kernpool_redactions_total"], a.Output, got["kernpool_spill_bytes_total"])
	}
	sum := sha256.Sum256([]byte(first))
	if a.Owner != "alice" || a.KernelID != res1.Kernel.ID || a.Mode != "default" || a.CodeBytes != len(first) ||
		a.CodeSHA256 != hex.EncodeToString(sum[:]) || a.Code == nil || *a.Code != first || a.Status != "success" ||
		a.Duration == "" || a.Seconds <= 0 || a.Time.IsZero() || a.ToolCalls["search"] != 2 || a.Output < int64(big) || a.Output >= wantOut {
		t.Errorf("the first cell's audit line: %+v", a)
	}
	if iso := res1.Kernel.Isolation; iso != nil && a.UID != iso.UID {
		t.Errorf("audit uid %d, the kernel's %d", a.UID, iso.UID)
	}
	if lines[2].Status != "timeout" || lines[3].ExitCode != 3 || lines[3].Status != string(exit.Status) {
		t.Errorf("the timeout and exit cells' audit lines: %+v, %+v", lines[2], lines[3])
	}
	if root && (lines[4].Owner != "bob" || !lines[4].OOMKilled) {
		t.Errorf("the OOM cell's audit line: %+v", lines[4])
	}
}

func readAudit(t *testing.T, path string) []auditLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
