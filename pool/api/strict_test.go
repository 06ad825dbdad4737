//go:build unix

package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// Every body the API refuses, against the real handler: only objects are
// requests, an over-limit body is 413, limits over the ceiling are a 400
// naming the field and the ceiling, sizes read like the config's.
func TestStrictRequestBodies(t *testing.T) {
	d := startDaemon(t, daemonOpts{
		pool:   func(c *pool.Config) { c.Ceiling = pool.Limits{MemoryMax: 1 << 30, PidsMax: 100, CPUMax: 1} },
		server: func(c *api.ServerConfig) { c.MaxBodyBytes = 4096 },
	})
	tests := []struct {
		name, body string
		status     int
		code       string
		wantInMsg  []string
	}{
		{"null", `null`, 400, api.CodeBadRequest, []string{"expected a JSON object", "null"}},
		{"null after spaces", " \n null", 400, api.CodeBadRequest, []string{"expected a JSON object", "null"}},
		{"array", `[{"code":"1"}]`, 400, api.CodeBadRequest, []string{"expected a JSON object", "array"}},
		{"string", `"print(1)"`, 400, api.CodeBadRequest, []string{"expected a JSON object", "string"}},
		{"number", `42`, 400, api.CodeBadRequest, []string{"expected a JSON object", "number"}},
		{"boolean", `true`, 400, api.CodeBadRequest, []string{"expected a JSON object", "boolean"}},
		{"over the body limit", `{"code":"` + strings.Repeat("x", 5000) + `"}`, 413, api.CodeTooLarge, []string{"exceeds 4096 bytes"}},
		{"memory over the ceiling", `{"code":"1","limits":{"memory_max":"8GiB"}}`, 400, api.CodeBadRequest, []string{"limits.memory_max", "8GiB", "ceiling of 1GiB"}},
		{"memory over the ceiling in bytes", `{"code":"1","limits":{"memory_max":2147483648}}`, 400, api.CodeBadRequest, []string{"limits.memory_max", "2GiB", "ceiling of 1GiB"}},
		{"pids over the ceiling", `{"code":"1","limits":{"pids_max":101}}`, 400, api.CodeBadRequest, []string{"limits.pids_max", "101", "ceiling of 100"}},
		{"cpu over the ceiling", `{"code":"1","limits":{"cpu_max":1.5}}`, 400, api.CodeBadRequest, []string{"limits.cpu_max", "1.5", "ceiling of 1"}},
		{"memory not a size", `{"code":"1","limits":{"memory_max":"lots"}}`, 400, api.CodeBadRequest, []string{"limits.memory_max", "64MiB"}},
		{"limits not an object", `{"code":"1","limits":[1]}`, 400, api.CodeBadRequest, []string{`"limits"`, "object"}},
		{"unknown limit", `{"code":"1","limits":{"swap_max":1}}`, 400, api.CodeBadRequest, []string{"swap_max", "memory_max"}},
		{"sizes as in the config", `{"code":"1","limits":{"memory_max":"64MiB","pids_max":50,"cpu_max":0.5}}`, 200, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { d.expect(t, "POST", "/v1/execute", tt.body, tt.status, tt.code, tt.wantInMsg) })
	}
	// Only the one valid request started a kernel.
	if ks := d.pool.List(); len(ks) != 1 {
		t.Fatalf("kernels = %d, want 1", len(ks))
	}
}

// A request whose limits or passthrough differ from its live kernel's is
// refused with 409 saying to pass reset; with reset the kernel restarts
// with the new ones; a request naming neither reuses the kernel.
func TestLiveKernelSettingsConflict(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := testCtx(t)
	first, err := d.client.Execute(ctx, pool.Request{Owner: "c", Code: "x = 1", Limits: pool.Limits{MemoryMax: 64 << 20}})
	if err != nil || first.Status != pool.StatusSuccess {
		t.Fatalf("first: %+v %v", first, err)
	}
	steps := []struct {
		name   string
		req    pool.Request
		status int    // 0: success
		reused bool   // for successes
		want   string // in the 409 message
	}{
		{"same limits", pool.Request{Limits: pool.Limits{MemoryMax: 64 << 20}, Code: "x"}, 0, true, ""},
		{"no limits named", pool.Request{Code: "x"}, 0, true, ""},
		{"other limits", pool.Request{Limits: pool.Limits{MemoryMax: 128 << 20}, Code: "x"}, 409, false, "pass reset"},
		{"passthrough", pool.Request{Passthrough: []string{"LANG"}, Code: "x"}, 409, false, "passthrough [LANG]"},
		{"other limits with reset", pool.Request{Limits: pool.Limits{MemoryMax: 128 << 20}, Reset: true, Code: "y = 2"}, 0, false, ""},
		{"the new limits now", pool.Request{Limits: pool.Limits{MemoryMax: 128 << 20}, Code: "y"}, 0, true, ""},
	}
	for _, s := range steps {
		s.req.Owner = "c"
		res, err := d.client.Execute(ctx, s.req)
		var apiErr *api.APIError
		switch {
		case s.status != 0:
			if !errors.As(err, &apiErr) || apiErr.StatusCode != s.status || apiErr.Code != api.CodeConflict ||
				!errors.Is(err, pool.ErrConflict) || !strings.Contains(apiErr.Message, s.want) {
				t.Fatalf("%s: %v, want %d conflict saying %q", s.name, err, s.status, s.want)
			}
		case err != nil || res.Status != pool.StatusSuccess || res.Kernel.Reused != s.reused:
			t.Fatalf("%s: %+v %v, want success reused=%v", s.name, res, err, s.reused)
		}
	}
}

// A client that sends its headers but not its body is answered 408 within
// the body timeout and holds nothing afterwards.
func TestSlowBodyTimesOut(t *testing.T) {
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.BodyReadTimeout = 300 * time.Millisecond }})
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(hangBound))
	if _, err := io.WriteString(c, "POST /v1/execute HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"code\""); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(raw), api.CodeTimeout) || !strings.Contains(string(raw), "300ms") {
		t.Fatalf("status %d body %s, want 408 %s", resp.StatusCode, raw, api.CodeTimeout)
	}
}

// A client whose body is refused (too slow: 408; over the size cap: 413)
// cannot keep the connection by sending the rest of an announced body
// slowly, or never: after the answer net/http reads up to 256 KiB of the
// rest to reuse the connection, and the body deadline still bounds that
// read, so the daemon closes the connection on its own.
func TestRefusedBodyCannotHoldTheConnection(t *testing.T) {
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) {
		c.BodyReadTimeout, c.MaxBodyBytes = 300*time.Millisecond, 64
	}})
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"slow body", `{"code"`, http.StatusRequestTimeout},
		{"over the cap", `{"code":"` + strings.Repeat("x", 100), http.StatusRequestEntityTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("unix", d.socket)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(hangBound))
			req := "POST /v1/execute HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + c.body
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(conn)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if n, err := r.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("after the %d the connection gave %d bytes, %v; want the daemon to close it (EOF)", c.status, n, err)
			}
		})
	}
}

// Connections over the cap get a clear 503 at once; idle ones cannot
// hold the daemon, and a freed slot serves again.
func TestConnectionCap(t *testing.T) {
	d := startDaemon(t, daemonOpts{maxConns: 2})
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			_ = c.Close()
		}
	}()
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(hangBound))
	_, _ = io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: k\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = c.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(raw), api.CodeTooManyConnections) ||
		!strings.Contains(string(raw), "maximum of 2 client connections") {
		t.Fatalf("status %d body %s, want 503 %s", resp.StatusCode, raw, api.CodeTooManyConnections)
	}
	_ = idle[0].Close()
	waitFor(t, "a freed connection slot", func() bool {
		_, err := d.client.Health(context.Background())
		d.client.CloseIdleConnections()
		return err == nil
	})
}

// A spilled cell names its spill; the endpoint serves exactly the file,
// refuses names that are not plain file names and unknown kernels.
func TestSpillEndpoint(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) { c.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) }})
	res := d.exec(t, "s", "print('y' * 60000)")
	if !res.StdoutTruncated || res.StdoutSpillName != "cell_000001_stdout.txt" || !strings.Contains(res.Warning, "kernpool spill "+res.Kernel.ID+" cell_000001_stdout.txt") {
		t.Fatalf("result %+v does not name its spill", res)
	}
	var b strings.Builder
	n, err := d.client.Spill(testCtx(t), res.Kernel.ID, res.StdoutSpillName, &b)
	if err != nil || n != 60001 || b.String() != strings.Repeat("y", 60000)+"\n" {
		t.Fatalf("spill: %d bytes, %v", n, err)
	}
	// The spill's length is announced, to a HEAD too (a client sizes its
	// download before it starts).
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		status, h, _ := d.raw(t, method, "/v1/kernels/"+res.Kernel.ID+"/spill/"+res.StdoutSpillName, "")
		if status != http.StatusOK || h.Get("Content-Length") != "60001" {
			t.Errorf("%s of the spill: %d, Content-Length %q; want 200, 60001", method, status, h.Get("Content-Length"))
		}
	}
	for _, tt := range []struct {
		path   string
		status int
	}{
		{"/v1/kernels/" + res.Kernel.ID + "/spill/..%2Fkernels", 400},
		{"/v1/kernels/" + res.Kernel.ID + "/spill/.hidden", 400},
		{"/v1/kernels/" + res.Kernel.ID + "/spill/cell_000009_stdout.txt", 404},
		{"/v1/kernels/knope/spill/cell_000001_stdout.txt", 404},
	} {
		if status, _, _ := d.raw(t, "GET", tt.path, ""); status != tt.status {
			t.Errorf("GET %s: %d, want %d", tt.path, status, tt.status)
		}
	}
}

// The body deadline ends with the body: a cell that runs longer than it,
// and the next one on the same connection, are not cut (decodeBody leaves
// clearing it to net/http once the body was read to its end).
func TestCellOutlastsBodyDeadline(t *testing.T) {
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.BodyReadTimeout = 200 * time.Millisecond }})
	cell := "import time\ntime.sleep(0.6)\nprint('slept')"
	for i := range 2 {
		res := d.exec(t, "outlast", cell)
		if res.Status != pool.StatusSuccess || strings.TrimSpace(res.Output) != "slept" {
			t.Fatalf("cell %d: %+v, want success printing slept", i, res)
		}
	}
}
