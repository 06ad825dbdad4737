package daemon_test

import (
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestReloadWithoutListenerSaysTokensAreNotInUse: a daemon without a
// network listener that rereads a config with new tokens says they are
// not in use, never that a reload applied them, and keeps running
// without them; a quota changed in the same reload is still applied.
func TestReloadWithoutListenerSaysTokensAreNotInUse(t *testing.T) {
	cfg := testConfig(t)
	d, _, logs := reloadDaemon(t, cfg)
	if cfg.Network.Listen != "" {
		t.Fatalf("the test config listens on %q", cfg.Network.Listen)
	}

	next := cloneConfig(d.Config())
	next.Network.Tokens = []daemon.Credential{{Name: "ops", SHA256: api.TokenDigest(adminToken), Admin: true}}
	if err := d.Reload(next); err != nil {
		t.Fatal(err)
	}
	log := logs.String()
	const unused = "reload: credentials changed but not in use: no network listener runs (listen is not set)"
	if !strings.Contains(log, unused) || !strings.Contains(log, "tokens: [] -> [ops]") {
		t.Errorf("the reload's log does not say the tokens are not in use:\n%s", log)
	}
	if strings.Contains(log, "reload applied") || strings.Contains(log, "nothing changed") {
		t.Errorf("the reload's log claims the tokens applied, or nothing changed:\n%s", log)
	}
	if n := len(d.Config().Network.Tokens); n != 0 {
		t.Errorf("the running config holds %d tokens, want 0 (no listener took them)", n)
	}

	next = cloneConfig(next)
	next.MaxKernelsPerOwner = 7
	next.Network.Tokens = nil
	if err := d.Reload(next); err != nil {
		t.Fatal(err)
	}
	log = logs.String()
	if strings.Count(log, unused) != 1 || !strings.Contains(log, "max_kernels_per_owner: 0 -> 7") {
		t.Errorf("a reload of a quota (its tokens as running) logs:\n%s", log)
	}
	if i := strings.LastIndex(log, "reload applied"); i < 0 || strings.Contains(log[i:], "tokens") {
		t.Errorf("the second reload's applied line is missing or names tokens:\n%s", log)
	}
}
