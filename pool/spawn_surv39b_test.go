package pool

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// closeFails is a tool server whose Close fails.
type closeFails struct{ fakeToolServer }

func (*closeFails) Close() error { return errors.New("socket busy") }

// A failed spawn closes the tool server it made, and warns when, and
// only when, that close failed.
func TestAbandonedSpawnClosesItsToolServer(t *testing.T) {
	var logs bytes.Buffer
	p := &Pool{log: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})}
	srv := &fakeToolServer{}
	p.abandonSpawn("k1", srv)
	if _, _, closed := srv.counts(); closed != 1 || logs.Len() != 0 {
		t.Fatalf("closed %d times, logs %q; want once, no warning", closed, logs.String())
	}
	p.abandonSpawn("k2", &closeFails{})
	if !strings.Contains(logs.String(), "tool server close failed") || !strings.Contains(logs.String(), "socket busy") {
		t.Fatalf("a failed close logged %q, want the warning with its error", logs.String())
	}
}
