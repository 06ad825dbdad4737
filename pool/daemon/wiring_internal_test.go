package daemon

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestSocketServerBounds: the API socket's slow-client bounds are the
// figures docs/api.md gives ("request headers must arrive within 10 s,
// kept-alive connections close after 2 minutes idle"). Waiting them out
// would take minutes, so the server's settings are checked.
func TestSocketServerBounds(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), hclog.NewNullLogger())
	if srv.ReadHeaderTimeout != 10*time.Second || srv.IdleTimeout != 2*time.Minute {
		t.Errorf("header timeout %v, idle timeout %v: docs/api.md says 10s and 2m0s", srv.ReadHeaderTimeout, srv.IdleTimeout)
	}
}

// TestPerOwnerUIDsSaySparesAreOff: with users.per_owner, a default
// profile asking for warm spares gets none, and the start log says why;
// without spares, or without per_owner, nothing is said.
func TestPerOwnerUIDsSaySparesAreOff(t *testing.T) {
	const line = "no warm spares: users.per_owner shares one uid per owner"
	for _, tc := range []struct {
		perOwner bool
		spares   int
		says     bool
	}{
		{true, 1, true},
		{true, 0, false},
		{false, 1, false},
	} {
		cfg := DefaultConfig()
		cfg.Users.PerOwner = tc.perOwner
		p := cfg.Profiles[DefaultProfile]
		p.Spares = tc.spares
		cfg.Profiles[DefaultProfile] = p
		var buf bytes.Buffer
		poolConfig(cfg, "/usr/bin/python3", seams{}, hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &buf}))
		if got := strings.Contains(buf.String(), line); got != tc.says {
			t.Errorf("per_owner %t, spares %d: logged %q, want the line %t", tc.perOwner, tc.spares, buf.String(), tc.says)
		}
	}
}
