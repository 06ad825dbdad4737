//go:build unix

package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// BenchmarkAPIExecWarm measures one `x=1` cell through the typed client
// over the Unix socket on a warm kernel: the API's overhead is this minus
// pool's BenchmarkPoolExecWarm.
func BenchmarkAPIExecWarm(b *testing.B) {
	d := startDaemon(b, daemonOpts{})
	ctx := context.Background()
	req := pool.Request{Owner: "bench", Code: "x=1"}
	if _, err := d.client.Execute(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	report := testenv.MeasureCPU(b, 0)
	b.ResetTimer()
	for b.Loop() {
		res, err := d.client.Execute(ctx, req)
		if err != nil || res.Status != pool.StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	b.StopTimer()
	report()
}

// BenchmarkAPIExecWarmRaw is BenchmarkAPIExecWarm without the Go client:
// one persistent connection writes a request serialised once and reads
// the answer with http.ReadResponse, checking its status and that the
// cell succeeded without decoding the JSON. This minus
// BenchmarkPoolExecWarm is the daemon's own cost per request (net/http's
// server, the handler, the JSON both ways), plus one read and one write
// on the client's side.
func BenchmarkAPIExecWarmRaw(b *testing.B) {
	d := startDaemon(b, daemonOpts{})
	cell := d.rawCell(b)
	cell()
	b.ReportAllocs()
	report := testenv.MeasureCPU(b, 0)
	b.ResetTimer()
	for b.Loop() {
		cell()
	}
	b.StopTimer()
	report()
}

// rawCell returns a function that runs `x=1` for owner "bench" over one
// persistent connection with a pre-serialised request (see
// BenchmarkAPIExecWarmRaw).
func (d *daemon) rawCell(b *testing.B) func() { return rawCellOn(b, d.socket) }

// rawCellOn is rawCell on the Unix socket at socket.
func rawCellOn(b *testing.B, socket string) func() {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	body := `{"owner":"bench","code":"x=1"}`
	wire := []byte("POST /v1/execute HTTP/1.1\r\nHost: kernpool\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	br := bufio.NewReader(conn)
	var got bytes.Buffer
	success := []byte(`"status":"success"`)
	return func() {
		if _, err := conn.Write(wire); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		got.Reset()
		_, err = got.ReadFrom(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Close || !bytes.Contains(got.Bytes(), success) {
			b.Fatalf("HTTP %d (close %v): %q, %v", resp.StatusCode, resp.Close, got.Bytes(), err)
		}
	}
}

// BenchmarkAPIOverhead runs the same warm `x=1` cell four ways in turn
// on one daemon and kernel: through the pool (the library), through the
// typed client, over a raw connection (BenchmarkAPIExecWarmRaw), and
// over a raw connection to a bare net/http server whose handler reads
// the body, runs the same pool.Execute under the request's context and
// writes a result encoded once beforehand (bareHTTP). The order rotates
// every iteration, so a shared machine's noise hits all four alike; it
// reports each one's median and the API's medians minus the library's
// (the targets: client - library <= 60 µs, raw - library <= 30
// µs). http-lib-ns is what net/http and the socket cost with no handler
// code at all; raw-http-ns is the API's own handler over that floor.
func BenchmarkAPIOverhead(b *testing.B) {
	d := startDaemon(b, daemonOpts{})
	ctx := context.Background()
	req := pool.Request{Owner: "bench", Code: "x=1"}
	ways := []func(){
		func() {
			res, err := d.pool.Execute(ctx, req)
			if err != nil || res.Status != pool.StatusSuccess {
				b.Fatalf("library: %+v, %v", res, err)
			}
		},
		func() {
			res, err := d.client.Execute(ctx, req)
			if err != nil || res.Status != pool.StatusSuccess {
				b.Fatalf("client: %+v, %v", res, err)
			}
		},
		d.rawCell(b),
		rawCellOn(b, bareHTTP(b, d, req)),
	}
	times := make([][]time.Duration, len(ways))
	for _, w := range ways {
		w()
	}
	for i := 0; b.Loop(); i++ {
		for j := range ways {
			k := (i + j) % len(ways)
			start := time.Now()
			ways[k]()
			times[k] = append(times[k], time.Since(start))
		}
	}
	lib, client, raw, bare := median(times[0]), median(times[1]), median(times[2]), median(times[3])
	b.ReportMetric(float64(lib.Nanoseconds()), "lib-ns")
	b.ReportMetric(float64(client.Nanoseconds()), "client-ns")
	b.ReportMetric(float64(raw.Nanoseconds()), "raw-ns")
	b.ReportMetric(float64((client - lib).Nanoseconds()), "client-lib-ns")
	b.ReportMetric(float64((raw - lib).Nanoseconds()), "raw-lib-ns")
	b.ReportMetric(float64((bare - lib).Nanoseconds()), "http-lib-ns")
	b.ReportMetric(float64((raw - bare).Nanoseconds()), "raw-http-ns")
}

// bareHTTP serves, on its own Unix socket beside d's, a handler with no
// code of the API's: it reads the body, runs req on d's pool under the
// request's context (as the API does, so a disconnect would cancel it)
// and answers 200 with a result encoded once here. It returns the socket.
func bareHTTP(b *testing.B, d *daemon, req pool.Request) string {
	res, err := d.pool.Execute(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	answer, err := json.Marshal(res)
	if err != nil {
		b.Fatal(err)
	}
	answer = append(answer, '\n')
	length := strconv.Itoa(len(answer))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		if res, err := d.pool.Execute(r.Context(), req); err != nil || res.Status != pool.StatusSuccess {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", length)
		_, _ = w.Write(answer)
	})
	socket := filepath.Join(filepath.Dir(d.socket), "bare.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		_ = srv.Close()
		recv(b, "the bare HTTP server's Serve to return", served)
	})
	return socket
}
