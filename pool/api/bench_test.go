//go:build unix

package api_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"

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
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	body := `{"owner":"bench","code":"x=1"}`
	wire := []byte("POST /v1/execute HTTP/1.1\r\nHost: kernpool\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	br := bufio.NewReader(conn)
	var got bytes.Buffer
	success := []byte(`"status":"success"`)
	cell := func() {
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
	cell()
	report := testenv.MeasureCPU(b, 0)
	b.ResetTimer()
	for b.Loop() {
		cell()
	}
	b.StopTimer()
	report()
}
