package daemon_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// TestOneRedactionPerSecretInACell: a cell that prints one secret counts
// one redaction (metric and audit line), streamed or not, whatever the
// secret's kind; two secrets count two. A streamed cell's events are
// cleaned as they go and its result cleans the same output again: the
// secret was still masked once.
func TestOneRedactionPerSecretInACell(t *testing.T) {
	const (
		ant = "sk-ant-api03-" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
		ghp = "ghp_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
		jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	)
	cases := []struct {
		name, print string
		want        int
	}{
		{"anthropic key", ant, 1},
		{"github token", ghp, 1},
		{"assignment", "DB_PASSWORD=hunter2hunter2", 1},
		{"bearer header", "Authorization: Bearer " + ant, 1},
		{"dsn password that is a token", "postgres://user:" + ant + "@db/x", 1},
		{"jwt", "token " + jwt, 1},
		{"private key", `-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----`, 1},
		{"two secrets", ant + " and " + ghp, 2},
		{"two secrets on two lines", ant + `\n` + ghp, 2},
	}
	cfg := testConfig(t)
	cfg.Audit.Path = filepath.Join(testTempDir(t), "audit.log")
	d, c, _ := reloadDaemon(t, cfg)
	ctx := context.Background()
	total := 0
	var want []int
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			req := pool.Request{Owner: "alice", Code: "print('" + tc.print + "')"}
			var res *pool.Result
			var err error
			if stream {
				res, err = c.ExecuteStream(ctx, req, nil)
			} else {
				res, err = c.Execute(ctx, req)
			}
			if err != nil || res.Status != pool.StatusSuccess || strings.Contains(res.Output, ant) || strings.Contains(res.Output, ghp) {
				t.Fatalf("%s (stream %v): %+v, %v", tc.name, stream, res, err)
			}
			total += tc.want
			want = append(want, tc.want)
			if got := redactionsTotal(t, scrapeMetrics(t, cfg)); got != total {
				t.Fatalf("%s (stream %v): kernpool_redactions_total %d, want %d", tc.name, stream, got, total)
			}
		}
	}
	if err := d.Shutdown(ctx); err != nil { // flushes the audit log
		t.Fatal(err)
	}
	lines := readAudit(t, cfg.Audit.Path)
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d", len(lines), len(want))
	}
	for i, l := range lines {
		if l.Redactions != want[i] {
			t.Errorf("audit line %d (%s): redactions %d, want %d", i, cases[i/2].name, l.Redactions, want[i])
		}
	}
}

// redactionsTotal is kernpool_redactions_total in a /metrics body.
func redactionsTotal(t *testing.T, body string) int {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "kernpool_redactions_total "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("kernpool_redactions_total %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no kernpool_redactions_total in /metrics")
	return 0
}
