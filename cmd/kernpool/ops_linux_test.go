package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernpool/kernpool/audit"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// opsConfig writes a config file (with the daemon's private cgroup
// parent) holding extra HCL and returns its path.
func opsConfig(t *testing.T, extra string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "ops.hcl")
	src := fmt.Sprintf("cgroup {\n  parent = \"kernpool-opstest-%d-%s\"\n}\n%s", os.Getpid(), filepath.Base(dir), extra)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// unixHTTP is an HTTP client that dials the daemon's socket.
func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// scrape GETs /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, hc *http.Client) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := hc.Get("http://kernpool/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value finds the series of family name whose labels include labels
// ("k=v" pairs) and returns its counter, gauge or histogram count.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	fam, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

type sessionCell struct {
	owner, code string
	timeout     api.Duration
	status      pool.Status
}

// TestOpsSession runs a scripted session against a real daemon with real
// kernels (a success, an error, a secret, a spill, a timeout, an OOM, a
// quota refusal, an eviction) and checks every counter of /metrics, the
// 429 of the quota, the CLI's exit code 4, and the audit log.
func TestOpsSession(t *testing.T) {
	testenv.RequireRoot(t) // the OOM needs a cgroup memory limit, which needs root
	conf, dir := opsConfig(t, `
max_kernels           = 3
max_kernels_per_owner = 1
audit_log             = "`+"AUDIT"+`"
output {
  inline_cap = 1000
}
profile "default" {
  memory_max     = "64MiB"
  timeout_action = "kill" # the timeout ends its kernel (an end reason to count)
  spares         = 0      # the counts below are of cold starts (spares_linux_test.go has spares)
}
`)
	auditPath := filepath.Join(dir, "audit.log")
	b, _ := os.ReadFile(conf)
	_ = os.WriteFile(conf, bytes.Replace(b, []byte("AUDIT"), []byte(auditPath), 1), 0o600)
	d := startServe(t, "--config", conf)
	client := api.NewClient(d.socket)
	defer client.CloseIdleConnections()
	hc := unixHTTP(d.socket)
	defer hc.CloseIdleConnections()

	secret := "sk-" + strings.Repeat("a1B2", 12)
	cells := []sessionCell{
		{owner: "a", code: "print('hi')", status: pool.StatusSuccess},
		{owner: "a", code: "1/0", status: pool.StatusError},
		{owner: "a", code: fmt.Sprintf("print(%q)", secret), status: pool.StatusSuccess},
		{owner: "a", code: "print('x' * 5000)", status: pool.StatusSuccess},
		{owner: "b", code: "import time; time.sleep(30)", timeout: api.Duration(time.Second), status: pool.StatusTimeout},
		{owner: "c", code: "x = b'a' * (256 << 20)", status: pool.StatusError},
		{owner: "q", code: "1", status: pool.StatusSuccess},
		{owner: "e", code: "2", status: pool.StatusSuccess},
		{owner: "f", code: "3", status: pool.StatusSuccess},
	}
	var sent []string
	for i, c := range cells {
		if c.owner == "e" {
			// Owner q is at its quota of one kernel: a second key is refused.
			quotaRefusals(t, hc, d.socket)
		}
		res, err := client.Execute(context.Background(), pool.Request{Owner: c.owner, Code: c.code, Timeout: time.Duration(c.timeout)})
		if err != nil {
			t.Fatalf("cell %d: %v", i, err)
		}
		if res.Status != c.status {
			t.Fatalf("cell %d (%s): status %s, want %s: %+v", i, c.code, res.Status, c.status, res)
		}
		sent = append(sent, c.code)
	}
	fams := scrape(t, hc)
	want := []struct {
		name   string
		labels []string
		v      float64
	}{
		{"kernpool_cells_total", []string{"mode=default", "status=success"}, 6},
		{"kernpool_cells_total", []string{"mode=default", "status=error"}, 2},
		{"kernpool_cells_total", []string{"mode=default", "status=timeout"}, 1},
		{"kernpool_cells_total", []string{"mode=default", "status=interrupted"}, 0},
		{"kernpool_cell_duration_seconds", []string{"mode=default"}, 9},
		{"kernpool_kernel_starts_total", []string{"mode=default"}, 6},
		{"kernpool_kernel_ends_total", []string{"mode=default", "reason=timeout"}, 1},
		{"kernpool_kernel_ends_total", []string{"mode=default", "reason=oom"}, 1},
		{"kernpool_kernel_ends_total", []string{"mode=default", "reason=lru"}, 1},
		{"kernpool_kernel_ends_total", []string{"mode=default", "reason=idle"}, 0},
		{"kernpool_kernel_ends_total", []string{"mode=default", "reason=crash"}, 0},
		{"kernpool_kernels_live", []string{"mode=default"}, 3},
		{"kernpool_kernels_spare", []string{"mode=default"}, 0},
		{"kernpool_oom_kills_total", []string{"mode=default"}, 1},
		{"kernpool_refusals_total", []string{"reason=quota"}, 3}, // the API's, the CLI's, the CLI's with --json
		{"kernpool_refusals_total", []string{"reason=capacity"}, 0},
		{"kernpool_redactions_total", nil, 1},
		{"kernpool_spill_bytes_total", nil, 5001},
		// hi\n, the masked secret (sk-a1B2...a1B2 and \n: 20 bytes), 5000 x and \n.
		{"kernpool_output_bytes_total", nil, 3 + 20 + 5001},
		{"kernpool_audit_write_failures_total", nil, 0},
	}
	for _, w := range want {
		if got := value(t, fams, w.name, w.labels...); got != w.v {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.v)
		}
	}
	if got := value(t, fams, "kernpool_dropped_bytes_total"); got < 3000 || got > 5001 {
		t.Errorf("dropped bytes %v, want the ~4000 bytes over the 1000-byte inline cap", got)
	}
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); v == "a" || v == "q" || strings.Contains(v, "print") {
					t.Errorf("%s carries an owner or code as a label value: %s=%q", fam.GetName(), l.GetName(), v)
				}
			}
		}
	}
	d.stop(t) // flushes the audit log
	checkAudit(t, auditPath, cells, sent)
	if n := strings.Count(d.logText(), "kernpool.pool: cell: "); n != len(cells) {
		// hclog's text format: one "cell" info line per settled cell.
		t.Errorf("%d cell log lines, want %d", n, len(cells))
	}
	if strings.Contains(d.logText(), secret) {
		t.Error("the daemon's log shows a cell's code or output")
	}
}

// quotaRefusals checks the 429 of the API and exit code 4 of the CLI for
// owner q's second kernel.
func quotaRefusals(t *testing.T, hc *http.Client, socket string) {
	t.Helper()
	body := `{"owner": "q", "cwd": "/tmp", "code": "1"}`
	resp, err := hc.Post("http://kernpool/v1/execute", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb api.ErrorBody
	_ = json.Unmarshal(raw, &eb)
	secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || eb.Code != api.CodeQuota || secs < 1 {
		t.Fatalf("over quota: %s Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), raw)
	}
	// The message names its operation once and says what frees the
	// quota (ending one of q's kernels), with no second retry hint.
	r := cli(t, "", "exec", "--socket", socket, "--owner", "q", "--cwd", "/tmp", "1")
	if r.code != 4 || !strings.HasPrefix(r.stderr, `kernpool exec: execute: owner "q" already has 1 live kernels, its quota max_kernels_per_owner: shut one of them down`) ||
		strings.Count(r.stderr, "execute: ") != 1 || strings.Contains(strings.ToLower(r.stderr), "retry") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("CLI over quota: %+v", r)
	}
	// --json: the error is one JSON object, with the daemon's code.
	r = cli(t, "", "exec", "--json", "--socket", socket, "--owner", "q", "--cwd", "/tmp", "1")
	var rep errorReport
	if err := json.Unmarshal([]byte(r.stderr), &rep); err != nil || r.code != 4 || rep.Code != api.CodeQuota || rep.ExitCode != 4 ||
		rep.RetryAfterSeconds < 1 || !strings.Contains(rep.Error, "shut one of them down") || r.stdout != "" {
		t.Fatalf("CLI over quota with --json: %+v (%v)", r, err)
	}
}

// checkAudit wants one valid line per cell, in order, with the SHA-256 of
// the code sent and no code (audit_code is off).
func checkAudit(t *testing.T, path string, cells []sessionCell, sent []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) != len(cells) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(lines), len(cells), raw)
	}
	for i, line := range lines {
		var rec audit.Record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line)
		}
		sum := sha256.Sum256([]byte(sent[i]))
		if rec.CodeSHA256 != hex.EncodeToString(sum[:]) || rec.CodeBytes != len(sent[i]) || rec.Code != nil {
			t.Errorf("line %d: hash/size/code %s %d %v, want the hash of %q", i, rec.CodeSHA256, rec.CodeBytes, rec.Code, sent[i])
		}
		if rec.Owner != cells[i].owner || rec.Status != cells[i].status || rec.KernelID == "" || rec.UID < 60000 || rec.Mode != "default" {
			t.Errorf("line %d: %+v, want owner %s status %s with a kernel and its uid", i, rec, cells[i].owner, cells[i].status)
		}
		if _, err := time.ParseDuration(rec.Duration); err != nil || rec.Time.IsZero() {
			t.Errorf("line %d: duration %q time %v", i, rec.Duration, rec.Time)
		}
		if oom := cells[i].owner == "c"; rec.OOMKilled != oom {
			t.Errorf("line %d: oom_killed %t", i, rec.OOMKilled)
		}
	}
}
