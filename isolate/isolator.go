package isolate

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
)

// The seams this package fills, with their ports' own types: the sandbox
// of one kernel (kernel's) and the factory the pool asks for one (pool's).
var (
	_ pool.SandboxFactory = (*Isolator)(nil)
	_ pool.SandboxStatser = (*Isolator)(nil)
	_ kernel.Sandbox      = (*Sandbox)(nil)
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

// resolver is the config NewSandbox resolves limits from: the latest
// SetLimits, else the one New got.
func (c *core) resolver() *Config {
	if l := c.live.Load(); l != nil {
		return l
	}
	return &c.cfg
}

// admit resolves mode's profile with a request's limits for kernel id and
// takes c.mu, refusing once the isolator is closed; on success the caller
// holds c.mu and unlocks it.
func (c *core) admit(id, mode string, lim Limits) (*specs.LinuxResources, Profile, error) {
	res, prof, err := c.resolver().resolve(mode, lim)
	if err != nil {
		return nil, Profile{}, fmt.Errorf("new sandbox %s: %w", id, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, Profile{}, fmt.Errorf("new sandbox %s: %w", id, ErrClosed)
	}
	return res, prof, nil
}

// NewSandbox is reserve as the pool's seam (pool.SandboxFactory).
func (i *Isolator) NewSandbox(id, owner, mode string, lim Limits) (kernel.Sandbox, error) {
	sb, err := i.reserve(id, owner, mode, lim)
	if err != nil {
		return nil, err
	}
	return sb, nil
}
