package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"runtime"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/audit"
	"github.com/kernpool/kernpool/metrics"
	"github.com/kernpool/kernpool/pool"
)

// opsKit is the operator side of a running daemon: metrics (always; the
// API socket serves them), the optional TCP scrape endpoint and the
// optional audit log. It is the pool's Observer.
type opsKit struct {
	metrics  *metrics.Metrics
	audit    *audit.Log // nil without audit_log
	observer pool.Observer
	scrape   *http.Server // nil without metrics_listen
	scrapeLn net.Listener
}

// newOpsKit opens what cfg asks for; the TCP listener is bound here so
// that a bad address stops the start before the API socket listens.
func newOpsKit(cfg *Config, version, revision string, log hclog.Logger) (*opsKit, error) {
	k := &opsKit{metrics: metrics.New(version, revision, cfg.Modes())}
	if cfg.Audit.Path != "" {
		a, err := audit.Open(audit.Config{
			Path: cfg.Audit.Path, IncludeCode: cfg.Audit.IncludeCode, MaxSize: cfg.Audit.MaxSize,
			Keep: cfg.Audit.Keep, OnFailure: k.metrics.AuditWriteFailed, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		k.audit = a
	}
	k.observer = pool.Observers(k.metrics, auditObserver(k.audit))
	if cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			k.close(context.Background())
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", k.metrics.Handler())
		k.scrape, k.scrapeLn = newHTTPServer(mux, log), ln
	}
	return k, nil
}

// auditObserver keeps a nil *audit.Log from becoming a non-nil Observer.
func auditObserver(a *audit.Log) pool.Observer {
	if a == nil {
		return nil
	}
	return a
}

// serveScrape serves the TCP metrics endpoint until close.
func (k *opsKit) serveScrape(log hclog.Logger) {
	if k.scrape == nil {
		return
	}
	log.Info("serving metrics", "addr", k.scrapeLn.Addr().String())
	go func() {
		if err := k.scrape.Serve(k.scrapeLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint failed", "error", err)
		}
	}()
}

// close stops the scrape endpoint and flushes the audit log.
func (k *opsKit) close(ctx context.Context) {
	if k.scrape != nil {
		_ = k.scrape.Shutdown(ctx)
	} else if k.scrapeLn != nil {
		_ = k.scrapeLn.Close()
	}
	if k.audit != nil {
		_ = k.audit.Close()
	}
}

// chgrpSocket gives the socket to group (a name or a gid), keeping 0660,
// so that the group's members may use the daemon.
func chgrpSocket(path, group string) error {
	if group == "" {
		return nil
	}
	if runtime.GOOS == "windows" {
		return errors.New("socket_group: Unix groups do not exist on Windows")
	}
	gid, err := strconv.Atoi(group)
	if err != nil {
		g, lerr := user.LookupGroup(group)
		if lerr != nil {
			return fmt.Errorf("socket_group: %w", lerr)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return fmt.Errorf("socket_group: gid %q: %w", g.Gid, err)
		}
	}
	if err := os.Chown(path, -1, gid); err != nil {
		return fmt.Errorf("socket_group: %w", err)
	}
	return nil
}

// quotas are the pool's per-owner quotas of cfg.
func quotas(cfg *Config) pool.Quotas {
	return pool.Quotas{MaxKernelsPerOwner: cfg.MaxKernelsPerOwner, MaxCellsPerMinutePerOwner: cfg.MaxCellsPerMinutePerOwner}
}
