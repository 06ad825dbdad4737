package pool

import (
	"cmp"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultIdleTimeout    = 1800 * time.Second
	DefaultCellTimeout    = 300 * time.Second
	DefaultMaxCellTimeout = 3600 * time.Second
	DefaultMaxKernels     = 64
	DefaultMaxToolCalls   = 50
	// Checkpoint store defaults (CheckpointConfig).
	DefaultCheckpointMaxBytesPerOwner = 256 << 20
	DefaultCheckpointRetention        = 24 * time.Hour
	DefaultCheckpointTimeout          = 60 * time.Second
	DefaultCheckpointIdle             = 30 * time.Second
	minReapInterval                   = 30 * time.Second
	maxReapInterval                   = 300 * time.Second
)

// Config configures a Pool. Zero fields take the documented defaults.
type Config struct {
	// StateDir is required: kernels stage under <StateDir>/kernels/<id>.
	StateDir string
	// DefaultInterpreter is the absolute path of the python3 used when a
	// Request leaves Interpreter empty. Empty: such requests are refused.
	DefaultInterpreter string
	// IdleTimeout is how long a kernel may sit without a cell before the
	// reaper kills it (default 1800s).
	IdleTimeout time.Duration
	// CellTimeout bounds a cell whose Request.Timeout is zero (default 300s).
	CellTimeout time.Duration
	// MaxCellTimeout clamps Request.Timeout (default 3600s).
	MaxCellTimeout time.Duration
	// MaxKernels caps live kernels across all owners (default 64). A new
	// kernel beyond it evicts the least recently used idle kernel; when
	// every kernel is busy the request fails with ErrCapacity.
	MaxKernels int
	// ReapInterval is the idle reaper's period (default
	// clamp(IdleTimeout/6, 30s, 300s)). Reaping also happens on every Execute.
	ReapInterval time.Duration
	// MaxToolCalls is the per-cell tool-call budget when a Request leaves
	// MaxToolCalls zero (default 50).
	MaxToolCalls int
	// Modes are the modes a request may name (the daemon passes its
	// profile names); any other is refused with an *UnknownModeError. An
	// empty mode means "default", which is always allowed. Empty: every
	// mode is accepted.
	Modes []string
	// Sandboxes confines each kernel; nil runs kernels as plain process
	// groups of the daemon's user.
	Sandboxes SandboxFactory
	// Env builds each kernel's environment; nil uses a minimal one copied
	// from the daemon: PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TERM,
	// TZ and SHELL, nothing else (no secrets can leak, none are known to mask).
	Env EnvBuilder
	// Output cleans each kernel's output; nil passes text through unchanged
	// (no redaction, no caps). The daemon always wires envscrub.
	Output OutputFilterFactory
	// Tools opens each kernel's tool-RPC listener; nil refuses requests that
	// name tools with ErrBadRequest.
	Tools ToolServerFactory
	// Ceiling bounds Request.Limits: a request over it is refused with
	// ErrBadRequest naming the field and the ceiling. Zero fields bound
	// nothing (the sandbox may still refuse).
	Ceiling Limits
	// Logger receives the pool's logs (Named "pool"); nil discards them.
	// Policies are the cell policies by mode (timeout action, interrupt
	// grace); a mode without one uses Policies["default"], and without
	// that the zero policy (interrupt, kernel.DefaultInterruptGrace).
	Policies map[string]CellPolicy
	Logger   hclog.Logger
	// Observer is told of kernels, cells and refusals (metrics, audit
	// log); nil observes nothing. Observers combines several.
	Observer Observer
	// Quotas are the per-owner limits (zero fields: unlimited);
	// SetQuotas changes them while the pool runs.
	Quotas Quotas
	// Warm are the warm-start settings by mode (spares, preload; see
	// Warm); a mode without an entry starts kernels on demand and
	// preloads nothing. SetWarm changes them while the pool runs.
	Warm map[string]Warm
	// Checkpoints configures the checkpoints of modes with
	// CellPolicy.Persist, kept under <StateDir>/checkpoints.
	Checkpoints CheckpointConfig
	// Sessions bounds explicit sessions and request environments
	// (sessions.go, env.go); zero fields take their defaults.
	Sessions SessionConfig
}

// Quotas are per-owner limits. Over one, Execute fails with a
// *QuotaError (errors.Is ErrQuota) saying when to retry.
type Quotas struct {
	// MaxKernelsPerOwner caps one owner's live kernels (0: unlimited). A
	// request that needs one more kernel is refused; its idle kernels are
	// not evicted for it (shut them down, or wait for the idle reaper).
	MaxKernelsPerOwner int
	// MaxCellsPerMinutePerOwner caps one owner's cells per minute (0:
	// unlimited), as a token bucket holding a minute's worth that refills
	// continuously: bursts up to the limit, then the limit per minute.
	MaxCellsPerMinutePerOwner int
}

// withDefaults validates cfg and fills its zero fields.
func (cfg Config) withDefaults() (_ Config, err error) {
	if cfg.StateDir == "" {
		return cfg, fmt.Errorf("state dir is required: %w", ErrBadRequest)
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return cfg, fmt.Errorf("state dir must be an absolute path: %w", ErrBadRequest)
	}
	if cfg.DefaultInterpreter != "" && !filepath.IsAbs(cfg.DefaultInterpreter) {
		return cfg, fmt.Errorf("default interpreter must be an absolute path: %w", ErrBadRequest)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idle timeout", cfg.IdleTimeout}, {"cell timeout", cfg.CellTimeout},
		{"max cell timeout", cfg.MaxCellTimeout}, {"reap interval", cfg.ReapInterval}} {
		if d.v < 0 {
			return cfg, fmt.Errorf("%s must not be negative: %w", d.name, ErrBadRequest)
		}
	}
	if cfg.Quotas.MaxKernelsPerOwner < 0 || cfg.Quotas.MaxCellsPerMinutePerOwner < 0 {
		return cfg, fmt.Errorf("quotas must not be negative: %w", ErrBadRequest)
	}
	if err := checkPolicies(cfg.Policies); err != nil {
		return cfg, err
	}
	if err := checkWarm(cfg.Warm); err != nil {
		return cfg, err
	}
	if cfg.MaxKernels < 0 || cfg.MaxToolCalls < 0 {
		return cfg, fmt.Errorf("max kernels and max tool calls must not be negative: %w", ErrBadRequest)
	}
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.CellTimeout = cmp.Or(cfg.CellTimeout, DefaultCellTimeout)
	cfg.MaxCellTimeout = cmp.Or(cfg.MaxCellTimeout, DefaultMaxCellTimeout)
	cfg.CellTimeout = min(cfg.CellTimeout, cfg.MaxCellTimeout)
	cfg.MaxKernels = cmp.Or(cfg.MaxKernels, DefaultMaxKernels)
	cfg.MaxToolCalls = cmp.Or(cfg.MaxToolCalls, DefaultMaxToolCalls)
	cfg.ReapInterval = cmp.Or(cfg.ReapInterval, min(max(cfg.IdleTimeout/6, minReapInterval), maxReapInterval))
	ck := &cfg.Checkpoints
	if ck.MaxBytesPerOwner < 0 || ck.Retention < 0 || ck.Timeout < 0 {
		return cfg, fmt.Errorf("checkpoint cap, retention and timeout must not be negative: %w", ErrBadRequest)
	}
	ck.MaxBytesPerOwner = cmp.Or(ck.MaxBytesPerOwner, DefaultCheckpointMaxBytesPerOwner)
	ck.Retention = cmp.Or(ck.Retention, DefaultCheckpointRetention)
	ck.Timeout = cmp.Or(ck.Timeout, DefaultCheckpointTimeout)
	ck.Idle = cmp.Or(ck.Idle, DefaultCheckpointIdle)
	if cfg.Sessions, err = cfg.Sessions.withDefaults(); err != nil {
		return cfg, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return cfg, nil
}
