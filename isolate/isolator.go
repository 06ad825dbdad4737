package isolate

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// core is what the Isolator of every platform holds: its configuration,
// logger and report, the live limits and the OOM-kill count.
type core struct {
	cfg      Config
	log      hclog.Logger
	report   Report
	oomKills atomic.Int64
	// live holds the limits of SetLimits (nil: cfg's).
	live   atomic.Pointer[Config]
	mu     sync.Mutex
	closed bool
}

// init validates cfg and keeps it (a nil Logger discards); New on every
// platform starts with it.
func (c *core) init(cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	c.cfg, c.log = cfg, cfg.Logger.Named("isolate")
	return nil
}
