package daemon

import (
	"net/http"
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
