//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRouterUsage: kernpool router refuses to start without listen and
// fleet_redis, or with a listener beyond loopback and no TLS (the
// node's own rule), as a usage error that names the problem; a
// registry it cannot reach is an error exit.
func TestRouterUsage(t *testing.T) {
	dir := t.TempDir()
	n := 0
	conf := func(src string) string { // one file per case: they are all written first
		n++
		p := filepath.Join(dir, fmt.Sprintf("router%d.hcl", n))
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := "token \"admin\" {\n  sha256 = \"" + strings.Repeat("ab", 32) + "\"\n  admin = true\n}\n"
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no config", []string{"router", "--config", conf("")}, exitUsage, "a router needs listen and fleet_redis"},
		{"no redis", []string{"router", "--config", conf("listen = \"127.0.0.1:0\"\n" + token)}, exitUsage, "fleet_redis"},
		{"plain beyond loopback", []string{"router", "--config", conf(token), "--listen", "0.0.0.0:9443", "--fleet-redis", "redis://127.0.0.1:1"}, exitUsage, "tls_cert"},
		{"registry unreachable", []string{"router", "--config", conf(token), "--listen", "127.0.0.1:0", "--fleet-redis", "unix://" + filepath.Join(dir, "none.sock")}, exitCellErr, "fleet registry"},
		{"extra argument", []string{"router", "x"}, exitUsage, "unexpected argument"},
		{"kubernetes discovery outside a pod", []string{"router", "--config", conf("fleet_kubernetes_service = \"kernpool-node\"\n" + token), "--listen", "127.0.0.1:0", "--fleet-redis", "redis://127.0.0.1:1"}, exitCellErr, "fleet_kubernetes_service: kubernetes node discovery config: not in a pod"},
	}
	for _, tc := range cases {
		r := cli(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
