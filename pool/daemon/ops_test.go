package daemon_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestMetricsListen: metrics_listen also serves GET /metrics on TCP (the
// log names the address); without it no TCP port is opened; an address
// that cannot be bound stops New, naming metrics listen.
func TestMetricsListen(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.MetricsListen = "127.0.0.1:0"
	d, logs, served := serveLogged(t, cfg)
	c := api.NewClient(cfg.Socket)
	defer c.CloseIdleConnections()
	if _, err := c.Health(ctx); err != nil { // Serve runs: the scrape endpoint too
		t.Fatal(err)
	}
	m := regexp.MustCompile(`serving metrics: addr=(127\.0\.0\.1:\d+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no \"serving metrics\" line:\n%s", logs)
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "kernpool_") {
		t.Errorf("GET /metrics on %s: %d\n%.300s", m[1], resp.StatusCode, body)
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}

	plain := testConfig(t)
	d, logs, served = serveLogged(t, plain)
	c2 := api.NewClient(plain.Socket)
	defer c2.CloseIdleConnections()
	if _, err := c2.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-served
	if strings.Contains(logs.String(), "serving metrics") {
		t.Errorf("a daemon without metrics_listen serves metrics on TCP:\n%s", logs)
	}

	bad := testConfig(t)
	bad.MetricsListen = "127.0.0.1:99999"
	if d, err := daemon.New(ctx, bad, daemon.WithLogger(hclog.NewNullLogger())); err == nil {
		_ = d.Shutdown(ctx)
		t.Fatal("New accepted metrics_listen 127.0.0.1:99999")
	} else if !strings.Contains(err.Error(), "metrics listen: ") {
		t.Errorf("New with a bad metrics_listen: %v", err)
	}
}
