//go:build unix

package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// TestRouterNodeTokenFile: fleet_node_token_file must name a readable,
// non-empty file, or the router does not start (and says which).
func TestRouterNodeTokenFile(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, err string
	}{
		{"a token", write("token", "kp_node_0123456789abcdef\n"), ""},
		{"missing", filepath.Join(dir, "absent"), "fleet_node_token_file: "},
		{"blank", write("blank", " \n\t\n"), "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "listen = \"127.0.0.1:0\"\nfleet_redis = \"" + srv.URL + "\"\nfleet_node_token_file = \"" + tc.file + "\"\n" +
				"token \"admin\" {\n  sha256 = \"" + strings.Repeat("ab", 32) + "\"\n  admin = true\n}\n"
			cfg, err := ParseConfig([]byte(src), "router.hcl")
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewRouter(context.Background(), cfg, "test", hclog.NewNullLogger())
			if err == nil {
				_ = r.Shutdown(context.Background())
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("NewRouter: %v", err)
			case tc.err != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("NewRouter: %v, want ErrConfig saying %q", err, tc.err)
			}
		})
	}
}
