package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestDoctorExitCodes: 0 with the isolation available and a daemon
// answering, 2 when no daemon answers on the socket it checks.
func TestDoctorExitCodes(t *testing.T) {
	testenv.RequireRoot(t) // as root the default sandbox isolation is available
	d := startServe(t)
	if r := cli(t, "", "doctor", "--socket", d.socket, "--state-dir", d.state); r.code != 0 {
		t.Fatalf("doctor with a daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	d.stop(t)
	r := cli(t, "", "doctor", "--socket", d.socket, "--state-dir", d.state)
	if r.code != 2 || !strings.Contains(r.stdout, "not reachable") {
		t.Fatalf("doctor without a daemon: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMetricsListen: --metrics-listen serves GET /metrics over TCP.
func TestMetricsListen(t *testing.T) {
	d := startServe(t, "--metrics-listen", "127.0.0.1:0")
	// The socket answering does not order the metrics listener's log line
	// before it: wait for the line.
	served := regexp.MustCompile(`serving metrics: addr=(127\.0\.0\.1:\d+)`)
	var m []string
	waitUntil(t, "the metrics address in the log", func() bool { m = served.FindStringSubmatch(d.logText()); return m != nil })
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "kernpool_build_info{") {
		t.Fatalf("GET /metrics over TCP: %s\n%.300s", resp.Status, body.String())
	}
}

// TestSdNotify: with NOTIFY_SOCKET set (as systemd's Type=notify does) the
// daemon sends READY=1 once its socket answers and STOPPING=1 on SIGTERM.
func TestSdNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = os.Chmod(path, 0o777)
	t.Setenv("NOTIFY_SOCKET", path)
	d := startServe(t)
	read := func() string {
		_ = conn.SetReadDeadline(time.Now().Add(testenv.Patience))
		buf := make([]byte, 256)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v\n%s", err, d.logText())
		}
		return string(buf[:n])
	}
	if got := read(); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	d.stop(t)
	if got := read(); got != "STOPPING=1" {
		t.Fatalf("notification at stop %q, want STOPPING=1", got)
	}
}

// TestVersion: the version line carries the build info's revision and Go
// version (the test binary is built without VCS stamping: "unknown");
// --version prints the same line.
func TestVersion(t *testing.T) {
	r := cli(t, "", "version")
	if r.code != 0 || !regexp.MustCompile(`^kernpool \S+ \(revision \S+(, modified)?, go1\.\d+`).MatchString(r.stdout) {
		t.Fatalf("version: %+v", r)
	}
	if flag := cli(t, "", "--version"); flag != r {
		t.Fatalf("--version: %+v, want what version prints: %+v", flag, r)
	}
}
