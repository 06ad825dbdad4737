//go:build integration && linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Result mirrors the documented result object (CLI --json and POST /v1/execute).
type Result struct {
	Status           string       `json:"status"`
	Output           string       `json:"output"`
	ExitCode         int          `json:"exit_code"`
	Error            string       `json:"error"`
	DurationSeconds  float64      `json:"duration_seconds"`
	ToolCallsMade    int          `json:"tool_calls_made"`
	Kernel           KernelResult `json:"kernel"`
	StdoutTruncated  bool         `json:"stdout_truncated"`
	StdoutBytesTotal int          `json:"stdout_bytes_total"`
	StdoutSpillPath  string       `json:"stdout_spill_path"`
	Warning          string       `json:"warning"`
	// Restored and Lost name what a restore brought back (persist = true).
	Restored []string `json:"restored"`
	Lost     []string `json:"lost"`
}

// KernelResult is the result's kernel block.
type KernelResult struct {
	ID             string `json:"id"`
	Mode           string `json:"mode"`
	Reused         bool   `json:"reused"`
	ExecutionCount int    `json:"execution_count"`
	StateReset     bool   `json:"state_reset"`
	Ended          bool   `json:"ended"`
	OOMKilled      bool   `json:"oom_killed"`
	Restored       bool   `json:"restored"`
	// Isolation is what was enforced (docs/api.md).
	Isolation *Isolation `json:"isolation"`
}

// Isolation mirrors the result's kernel.isolation block.
type Isolation struct {
	Mode       string   `json:"mode"`
	UID        int      `json:"uid"`
	Namespaces []string `json:"namespaces"`
	Seccomp    bool     `json:"seccomp"`
	MemoryMax  int64    `json:"memory_max"`
	PidsMax    int64    `json:"pids_max"`
	CPUMax     float64  `json:"cpu_max"`
	Network    bool     `json:"network"`
}

// KernelInfo is one entry of GET /v1/kernels.
type KernelInfo struct {
	ID             string `json:"id"`
	Owner          string `json:"owner"`
	Mode           string `json:"mode"`
	Pid            int    `json:"pid"`
	UID            int    `json:"uid"`
	Busy           bool   `json:"busy"`
	ExecutionCount int    `json:"execution_count"`
	MemoryCurrent  int64  `json:"memory_current_bytes"`
	Pids           int64  `json:"pids"`
	// Isolation is what is enforced, as in results.
	Isolation *Isolation `json:"isolation"`
	// Spare: a warm spare waiting for a new owner.
	Spare bool `json:"spare"`
}

// Health is GET /v1/health.
type Health struct {
	Status     string `json:"status"`
	Kernels    int    `json:"kernels"`
	Isolation  string `json:"isolation"`
	Goroutines int    `json:"goroutines"`
	Stats      struct {
		Reaped  uint64 `json:"reaped"`
		Evicted uint64 `json:"evicted"`
		Killed  uint64 `json:"killed"`
		// KernelsSaving: evicted or reaped kernels whose save runs.
		KernelsSaving int `json:"kernels_saving"`
	} `json:"stats"`
}

// ExecReq is the body of POST /v1/execute.
type ExecReq struct {
	Owner       string         `json:"owner,omitempty"`
	Mode        string         `json:"mode,omitempty"`
	Tools       []string       `json:"tools,omitempty"`
	Code        string         `json:"code"`
	Reset       bool           `json:"reset,omitempty"`
	Timeout     string         `json:"timeout,omitempty"`
	Passthrough []string       `json:"passthrough,omitempty"`
	Limits      map[string]any `json:"limits,omitempty"`
}

// APIError is a non-2xx answer of the daemon.
type APIError struct {
	Status int
	Body   string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// API talks HTTP/JSON to the daemon over its Unix socket. Keep-alives are
// off so the daemon's fd count returns to its baseline between requests.
type API struct {
	hc *http.Client
}

func newAPI(socket string) *API {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &API{hc: &http.Client{Transport: tr}}
}

func (a *API) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://kernpool"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %s %s: %w (body %.300q)", method, path, err, b)
		}
	}
	return nil
}

// Execute runs one cell through POST /v1/execute.
func (a *API) Execute(ctx context.Context, r ExecReq) (Result, error) {
	var res Result
	err := a.do(ctx, http.MethodPost, "/v1/execute", r, &res)
	return res, err
}

// Kernels lists the live kernels.
func (a *API) Kernels(ctx context.Context) ([]KernelInfo, error) {
	var out struct {
		Kernels []KernelInfo `json:"kernels"`
	}
	err := a.do(ctx, http.MethodGet, "/v1/kernels", nil, &out)
	return out.Kernels, err
}

// Checkpoint is one entry of GET /v1/kernels' checkpoints.
type Checkpoint struct {
	Owner   string `json:"owner"`
	Mode    string `json:"mode"`
	Bytes   int64  `json:"bytes"`
	Names   int    `json:"names"`
	Reason  string `json:"reason"`
	Refused string `json:"refused"`
}

// Checkpoints lists the stored checkpoints.
func (a *API) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out struct {
		Checkpoints []Checkpoint `json:"checkpoints"`
	}
	err := a.do(ctx, http.MethodGet, "/v1/kernels", nil, &out)
	return out.Checkpoints, err
}

// Health reads /v1/health.
func (a *API) Health(ctx context.Context) (Health, error) {
	var h Health
	err := a.do(ctx, http.MethodGet, "/v1/health", nil, &h)
	return h, err
}

// Kill kills one kernel by id.
func (a *API) Kill(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodDelete, "/v1/kernels/"+url.PathEscape(id), nil, nil)
}

// Shutdown disposes every kernel of owner.
func (a *API) Shutdown(ctx context.Context, owner string) error {
	return a.do(ctx, http.MethodPost, "/v1/owners/"+url.PathEscape(owner)+"/shutdown", nil, nil)
}

// Run executes code for owner over the API and records the kernel it used;
// it fails the test on a transport or HTTP error.
func (d *Daemon) Run(t *testing.T, owner, code string) Result {
	t.Helper()
	return d.RunReq(t, ExecReq{Owner: owner, Code: code, Timeout: "60s"})
}

// RunReq is Run with a full request.
func (d *Daemon) RunReq(t *testing.T, r ExecReq) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scaled(2*time.Minute))
	defer cancel()
	res, err := d.api.Execute(ctx, r)
	if err != nil {
		t.Fatalf("execute for %q: %v", r.Owner, err)
	}
	d.noteResult(res)
	return res
}

// Exec runs code through `kernpool exec --json` and returns the parsed
// result and the CLI's exit code.
func (d *Daemon) Exec(t *testing.T, owner, code string, args ...string) (Result, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scaled(2*time.Minute))
	defer cancel()
	full := append([]string{"--owner", owner, "--json"}, args...)
	full = append(full, "-")
	out, errOut, rc := d.CLI(ctx, code, "exec", full...)
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("kernpool exec --json (exit %d) printed no result object: %v\nstdout: %.500s\nstderr: %.500s", rc, err, out, errOut)
	}
	d.noteResult(res)
	return res, rc
}

// Live lists the live kernels and records their ids and uids.
func (d *Daemon) Live(t *testing.T) []KernelInfo {
	t.Helper()
	ks, err := d.api.Kernels(context.Background())
	if err != nil {
		t.Fatalf("GET /v1/kernels: %v", err)
	}
	d.mu.Lock()
	for _, k := range ks {
		d.ids[k.ID] = true
		if k.UID > 0 {
			d.uids[k.UID] = true
		}
	}
	d.mu.Unlock()
	return ks
}

func (d *Daemon) noteResult(r Result) {
	if r.Kernel.ID != "" {
		d.mu.Lock()
		d.ids[r.Kernel.ID] = true
		d.mu.Unlock()
	}
}
