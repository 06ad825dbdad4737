//go:build unix

package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/redistest"
)

// TestRouterReloadKeepsFleetKeys: a router's SIGHUP rereads its
// credentials, and a reload that changes a fleet_* key is refused with
// the old ones kept (they are read once, at start).
func TestRouterReloadKeepsFleetKeys(t *testing.T) {
	srv := redistest.Start(t)
	src := "listen = \"127.0.0.1:0\"\nfleet_redis = \"" + srv.URL + "\"\n" +
		"token \"admin\" {\n  sha256 = \"" + strings.Repeat("ab", 32) + "\"\n  admin = true\n}\n"
	cfg, err := ParseConfig([]byte(src), "router.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(context.Background(), cfg, "test", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	same, _ := ParseConfig([]byte(src), "router.hcl")
	if err := r.Reload(same); err != nil {
		t.Fatalf("reload with the same keys: %v", err)
	}
	for _, extra := range []string{
		"fleet_kubernetes_service = \"kernpool-node\"\n",
		"fleet_node_ca = \"/etc/ssl/certs/ca-certificates.crt\"\n",
		"fleet_heartbeat = \"3s\"\n",
	} {
		next, err := ParseConfig([]byte(src+extra), "router.hcl")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Reload(next); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "fleet_*") {
			t.Errorf("reload adding %q: %v, want refused", strings.TrimSpace(extra), err)
		}
	}
}
