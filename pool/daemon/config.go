package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
)

// Config is the daemon's resolved configuration: defaults, then the HCL
// file, then command-line flags. docs/config.md documents every field.
type Config struct {
	// File is the config file that was read ("" for none): --config, else
	// DefaultConfigFile when it exists. SIGHUP rereads it.
	File string
	// Isolation is what kernels are promised: "sandbox" (the default:
	// serve refuses to start when any configured protection cannot be
	// applied) or "process" (the explicit degraded mode; kernels may share
	// the daemon's uid). kernel.IsolationModes lists them.
	Isolation kernel.IsolationMode
	// Socket is the Unix socket path the API is served on.
	Socket string
	// StateDir holds the kernels' staging dirs (<StateDir>/kernels/<id>).
	StateDir string
	// LogLevel is an hclog level name (trace, debug, info, warn, error).
	LogLevel string
	// LogJSON switches the logs to one JSON object per line.
	LogJSON bool
	// Interpreter is the default python3; empty means resolve python3 on PATH.
	Interpreter string
	// IdleTimeout reaps kernels idle longer than this.
	IdleTimeout time.Duration
	// CellTimeout bounds a cell that does not ask for its own timeout.
	CellTimeout time.Duration
	// MaxCellTimeout clamps every requested cell timeout.
	MaxCellTimeout time.Duration
	// MaxKernels caps live kernels across owners (LRU eviction).
	MaxKernels int
	// MaxToolCalls is the default tool-call budget of one cell.
	MaxToolCalls int
	// ToolCallTimeout bounds how long a streamed tool call waits for its answer.
	ToolCallTimeout time.Duration
	// DrainGrace is how long running cells may finish after SIGTERM/SIGINT.
	DrainGrace time.Duration
	// SocketGroup, when set, is the group (name or gid) the API socket is
	// chgrp'ed to (mode 0660), so its members may use the daemon.
	SocketGroup string
	// MetricsListen is a TCP address ("127.0.0.1:9464") serving GET
	// /metrics; empty serves metrics on the API socket only.
	MetricsListen string
	// MaxKernelsPerOwner caps one owner's live kernels (0: unlimited).
	MaxKernelsPerOwner int
	// MaxCellsPerMinutePerOwner caps one owner's cells per minute (0: unlimited).
	MaxCellsPerMinutePerOwner int
	// Audit configures the audit log.
	Audit AuditConfig
	// Env configures the child environment (parity §1).
	Env EnvConfig
	// Output configures redaction and output caps (parity §2).
	Output OutputConfig
	// Cgroup configures the pool's cgroup parent.
	Cgroup CgroupConfig
	// Users configures per-kernel unprivileged users (root only).
	Users UsersConfig
	// Profiles are the resource profiles by mode name; "default" always exists.
	Profiles map[string]Profile
	// Ceiling bounds per-request limit overrides.
	Ceiling Ceiling
	// Network configures the API's network listener (listen, tls_*,
	// token and client_cert blocks; docs/fleet.md).
	Network NetworkConfig
	// DrainOnTerm makes SIGTERM drain the node as `kernpool drain` does
	// (cells refused with code draining, persist kernels saved, exit 1
	// when a save failed) instead of the plain shutdown.
	DrainOnTerm bool
	// Checkpoints configures the checkpoints of profiles with Persist
	// (checkpoint_max_bytes_per_owner, checkpoint_retention,
	// checkpoint_timeout, checkpoint_idle; docs/design.md, "Lossless
	// eviction"). Checkpoints.Idle 0 turns idle saves off.
	Checkpoints pool.CheckpointConfig
	// Sessions bounds explicit sessions and request env values
	// (max_sessions, max_sessions_per_owner, session_idle_timeout,
	// max_env_names, max_env_bytes).
	Sessions pool.SessionConfig
	// CheckpointStore is where checkpoints are kept (docs/config.md,
	// "Checkpoint store"); its zero value is the local store.
	CheckpointStore StoreConfig
	// Fleet joins the node to a fleet's registry, and configures
	// `kernpool router` (fleet_*, node_name, advertise_url; docs/fleet.md).
	Fleet FleetConfig
}

// FleetConfig names the fleet's registry and how this process appears
// in it. Empty Redis: no fleet (serve behaves as on one host).
type FleetConfig struct {
	// Redis is fleet_redis: redis://host:port/db, rediss:// (TLS) or
	// unix:///path; its password may come from $KERNPOOL_FLEET_REDIS_PASSWORD.
	Redis string
	// NodeName is node_name: the node's name in the fleet (default: the
	// host name).
	NodeName string
	// AdvertiseURL is advertise_url: where routers reach this node's
	// listener (https://host:port); required with fleet_redis on a node.
	AdvertiseURL string
	// Heartbeat is fleet_heartbeat: how often the node publishes itself
	// (its registration lives three of them).
	Heartbeat time.Duration
	// NodeTokenFile is fleet_node_token_file (router): a token the nodes
	// accept, for clients that authenticate to the router with a
	// certificate.
	NodeTokenFile string
	// NodeCA is fleet_node_ca (router): the PEM bundle the nodes'
	// certificates are verified against (default: the system's).
	NodeCA string
	// KubernetesService is fleet_kubernetes_service (router): the
	// Service of the node agents whose EndpointSlices say which
	// registered nodes are live (fleet/k8snodes); "" trusts the
	// heartbeats alone.
	KubernetesService string
	// KubernetesNamespace is fleet_kubernetes_namespace (router): that
	// Service's namespace (default: the router pod's own).
	KubernetesNamespace string
}

// StoreConfig names a shared checkpoint store. Credentials never come
// from the config file: the AWS variables or a credentials file give
// them (pool/ckpts3).
type StoreConfig struct {
	// URL is checkpoint_store: "" (files under the state dir) or
	// s3://bucket[/prefix].
	URL string
	// Endpoint is checkpoint_store_endpoint: an S3-compatible server
	// (default AWS_ENDPOINT_URL, else Amazon S3).
	Endpoint string
	// AllowHTTP is checkpoint_store_allow_http: accept a plain http
	// endpoint.
	AllowHTTP bool
}

// AuditConfig configures the audit log (one JSON line per cell).
type AuditConfig struct {
	// Path is the audit log file; empty disables the audit log.
	Path string
	// IncludeCode stores each cell's code, not only its size and SHA-256.
	IncludeCode bool
	// MaxSize rotates the file before it grows past this many bytes.
	MaxSize int64
	// Keep is how many rotated files (PATH.1 ... PATH.N) are kept.
	Keep int
}

// EnvConfig configures environment scrubbing.
type EnvConfig struct {
	// Passthrough names variables every kernel keeps (subject to Refuse).
	Passthrough []string
	// Refuse lists names and glob patterns never passed through; nil means
	// envscrub's default list of provider credentials.
	Refuse []string
}

// OutputConfig configures the output pipeline.
type OutputConfig struct {
	// RedactPatterns turns pattern redaction on; exact secret values are always masked.
	RedactPatterns bool
	// InlineCap caps inline stdout bytes of one cell.
	InlineCap int
	// StderrCap caps inline stderr bytes of one cell.
	StderrCap int
	// SpillCap caps the spill file holding a cell's full stdout.
	SpillCap int
	// SpillQuota caps one kernel's spill files together (0: 4 x SpillCap);
	// the oldest go first.
	SpillQuota int64
}

// CgroupConfig configures the pool-owned cgroup parent.
type CgroupConfig struct {
	// Parent names the pool's parent group; empty means the default
	// derived from the state dir, "kernpool-<hash>" (cgroup.ParentFor).
	Parent string
	// Enabled puts each kernel in its own cgroup when the host allows it.
	Enabled bool
}

// UsersConfig configures the unprivileged users kernels run as.
type UsersConfig struct {
	// Enabled runs kernels as unprivileged uids when the daemon is root.
	Enabled bool
	// UIDFirst and UIDLast bound the uid range (inclusive).
	UIDFirst, UIDLast int
	// PerOwner gives each owner a stable uid instead of one per kernel.
	PerOwner bool
}

// Profile is the resource profile of one mode.
type Profile struct {
	// MemoryMax is the memory limit in bytes (0: unlimited).
	MemoryMax int64
	// MemorySwapMax is the swap limit in bytes (0: no swap beyond memory).
	MemorySwapMax int64
	// PidsMax caps tasks in the kernel's cgroup (0: unlimited).
	PidsMax int64
	// CPUMax is the CPU quota in cores (0: unlimited).
	CPUMax float64
	// CPUWeight is the relative CPU weight (1-10000, 0: the host default).
	CPUWeight uint64
	// Passthrough names extra variables kernels of this mode keep.
	Passthrough []string
	// Network keeps the host network (false, the default: the kernel's own
	// network namespace with only loopback up).
	Network bool
	// PIDNamespace: kept for older configs. Every kernel has its own pid
	// namespace and /proc under the kernel init step.
	PIDNamespace bool
	// PrivateTmp: kept for older configs. Every kernel has private /tmp,
	// /var/tmp and /dev/shm under the kernel init step.
	PrivateTmp bool
	// TmpSize is the size in bytes of each private tmpfs (/tmp, /var/tmp,
	// /dev/shm; 0: 64 MiB); the pages count against MemoryMax.
	TmpSize int64
	// PtyMax is how many ptys the kernel's own devpts holds (0: 16).
	PtyMax int
	// MemoryMerge lets idle kernels of the profile share their identical
	// pages through the host's samepage merging (isolate.Profile.MemoryMerge;
	// off by default: docs/design.md, "Sharing idle kernels' pages").
	MemoryMerge bool
	// TimeoutAction is what a cell timeout does: "interrupt" (default:
	// KeyboardInterrupt, the kernel keeps its state if the cell stops
	// within InterruptGrace) or "kill" (the reference's behaviour).
	TimeoutAction string
	// InterruptGrace is how long an interrupted cell may take to stop
	// before its kernel is killed (default 2s).
	InterruptGrace time.Duration
	// Spares is how many kernels of the profile are kept started ahead
	// of demand (default 2; 0: none). They count toward MaxKernels; with
	// per-owner uids there are none (a spare's owner is not known yet).
	Spares int
	// Preload are modules every kernel of the profile imports before its
	// first cell (spares and cold starts alike).
	Preload []string
	// Persist checkpoints the profile's kernels when the pool evicts,
	// reaps or drains them and restores the state into the key's next
	// kernel (pool.CellPolicy.Persist).
	Persist bool
	// FilesMaxBytes caps one upload through the files API
	// (default pool.DefaultFilesMaxBytes, 256 MiB).
	FilesMaxBytes int64
}

// Ceiling bounds per-request resource overrides.
type Ceiling struct {
	// MemoryMax is the largest memory limit a request may ask for, in bytes.
	MemoryMax int64
	// PidsMax is the largest pids limit a request may ask for.
	PidsMax int64
	// CPUMax is the largest CPU quota a request may ask for, in cores.
	CPUMax float64
}

// DefaultConfigFile is read when it exists and no --config is given.
const DefaultConfigFile = "/etc/kernpool/kernpool.hcl"

// DefaultProfile is the profile a mode without its own profile uses.
const DefaultProfile = "default"

// DefaultConfig returns the built-in defaults (docs/config.md lists them).
func DefaultConfig() *Config {
	return &Config{
		Isolation:       kernel.IsolationSandbox,
		LogLevel:        "info",
		IdleTimeout:     30 * time.Minute,
		CellTimeout:     300 * time.Second,
		MaxCellTimeout:  time.Hour,
		MaxKernels:      64,
		MaxToolCalls:    50,
		ToolCallTimeout: 120 * time.Second,
		DrainGrace:      10 * time.Second,
		Audit:           AuditConfig{MaxSize: 100 << 20, Keep: 5},
		Output:          OutputConfig{RedactPatterns: true, InlineCap: envscrub.DefaultInlineCap, StderrCap: envscrub.DefaultStderrCap, SpillCap: envscrub.DefaultSpillCap},
		Cgroup:          CgroupConfig{Enabled: true},
		Users:           UsersConfig{Enabled: true, UIDFirst: 60000, UIDLast: 60999},
		Profiles:        map[string]Profile{DefaultProfile: defaultProfile()},
		Ceiling:         Ceiling{MemoryMax: 4 << 30, PidsMax: 4096, CPUMax: 2.0},
		Network:         defaultNetwork(),
		Fleet:           FleetConfig{Heartbeat: fleet.DefaultHeartbeat},
		Checkpoints: pool.CheckpointConfig{MaxBytesPerOwner: pool.DefaultCheckpointMaxBytesPerOwner,
			Retention: pool.DefaultCheckpointRetention, Timeout: pool.DefaultCheckpointTimeout, Idle: pool.DefaultCheckpointIdle},
		Sessions: pool.SessionConfig{MaxSessions: pool.DefaultMaxSessions, MaxSessionsPerOwner: pool.DefaultMaxSessionsPerOwner,
			IdleTimeout: pool.DefaultSessionIdleTimeout, MaxEnvNames: pool.DefaultMaxEnvNames, MaxEnvBytes: pool.DefaultMaxEnvBytes},
	}
}

func defaultProfile() Profile {
	return Profile{MemoryMax: 512 << 20, PidsMax: 256, CPUMax: 1.0, CPUWeight: 100, TmpSize: 64 << 20,
		TimeoutAction: string(pool.TimeoutInterrupt), InterruptGrace: kernel.DefaultInterruptGrace, Spares: pool.DefaultSpares,
		FilesMaxBytes: pool.DefaultFilesMaxBytes}
}

// LoadConfigFile reads an HCL config file over the defaults. Every problem
// (syntax, unknown attribute or block, bad size or duration) is reported
// with its file:line.
func LoadConfigFile(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseConfig(src, path)
}

// ParseConfig parses HCL source (named filename in diagnostics) over the defaults.
func ParseConfig(src []byte, filename string) (*Config, error) {
	parser := hclparse.NewParser()
	f, diags := parser.ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diagError(parser, diags)
	}
	var raw fileConfig
	if diags := gohcl.DecodeBody(f.Body, nil, &raw); diags.HasErrors() {
		return nil, diagError(parser, diags)
	}
	cfg := DefaultConfig()
	if diags := raw.apply(cfg); diags.HasErrors() {
		return nil, diagError(parser, diags)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	return cfg, nil
}

// diagError renders HCL diagnostics as one error, "file:line,col: summary; detail".
func diagError(_ *hclparse.Parser, diags hcl.Diagnostics) error {
	msg := ""
	for i, d := range diags.Errs() {
		if i > 0 {
			msg += "\n"
		}
		msg += d.Error()
	}
	return fmt.Errorf("%w: %s", ErrConfig, msg)
}

// Validate checks the cross-field rules the parser cannot.
func (c *Config) Validate() error {
	check := []struct {
		bad  bool
		what string
	}{
		{c.IdleTimeout <= 0, "idle_timeout must be positive"},
		{c.CellTimeout <= 0, "cell_timeout must be positive"},
		{c.MaxCellTimeout < c.CellTimeout, "max_cell_timeout must be at least cell_timeout"},
		{c.MaxKernels < 1, "max_kernels must be at least 1"},
		{c.MaxToolCalls < 0, "max_tool_calls must not be negative"},
		{c.ToolCallTimeout <= 0, "tool_call_timeout must be positive"},
		{c.DrainGrace < 0, "drain_grace must not be negative"},
		{c.MaxKernelsPerOwner < 0, "max_kernels_per_owner must not be negative"},
		{c.MaxCellsPerMinutePerOwner < 0, "max_cells_per_minute_per_owner must not be negative"},
		{c.Audit.MaxSize < 0 || c.Audit.Keep < 0, "audit_max_size and audit_keep must not be negative"},
		{c.Output.InlineCap <= 0 || c.Output.StderrCap <= 0 || c.Output.SpillCap <= 0 || c.Output.SpillQuota < 0, "output caps must be positive"},
		{int64(c.Output.InlineCap)+3*int64(c.Output.StderrCap) > envscrub.ResultTextBudget,
			fmt.Sprintf("output.inline_cap + 3 x output.stderr_cap must stay within %d bytes (one result: stdout, stderr, traceback, error)", envscrub.ResultTextBudget)},
		{c.Output.SpillQuota > 0 && c.Output.SpillQuota < int64(c.Output.SpillCap), "output.spill_quota must hold at least one spill (spill_cap)"},
		{c.Users.UIDFirst <= 0 || c.Users.UIDLast < c.Users.UIDFirst, "users.uid_range must be FIRST-LAST with 0 < FIRST <= LAST"},
		{c.Checkpoints.MaxBytesPerOwner <= 0 || c.Checkpoints.Retention <= 0 || c.Checkpoints.Timeout <= 0,
			"checkpoint_max_bytes_per_owner, checkpoint_retention and checkpoint_timeout must be positive"},
		{c.Checkpoints.Idle < 0, "checkpoint_idle must not be negative (0 turns idle saves off)"},
		{c.Sessions.MaxSessions <= 0 || c.Sessions.MaxSessionsPerOwner <= 0 || c.Sessions.IdleTimeout <= 0 || c.Sessions.MaxEnvNames <= 0 || c.Sessions.MaxEnvBytes <= 0,
			"max_sessions, max_sessions_per_owner, session_idle_timeout, max_env_names and max_env_bytes must be positive"},
		{c.CheckpointStore.URL != "" && !strings.HasPrefix(c.CheckpointStore.URL, "s3://"),
			fmt.Sprintf("checkpoint_store %q: want \"\" (the state dir) or s3://bucket[/prefix]", c.CheckpointStore.URL)},
		{c.CheckpointStore.URL == "" && (c.CheckpointStore.Endpoint != "" || c.CheckpointStore.AllowHTTP),
			"checkpoint_store_endpoint and checkpoint_store_allow_http need checkpoint_store"},
		{c.Fleet.Heartbeat <= 0, "fleet_heartbeat must be positive"},
	}
	for _, ch := range check {
		if ch.bad {
			return fmt.Errorf("%w: %s", ErrConfig, ch.what)
		}
	}
	if err := c.Network.validate(); err != nil {
		return err
	}
	if _, err := kernel.ParseIsolationMode(string(c.Isolation)); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if _, ok := c.Profiles[DefaultProfile]; !ok {
		return fmt.Errorf("%w: the %q profile is missing", ErrConfig, DefaultProfile)
	}
	for name, p := range c.Profiles {
		if p.MemoryMax < 0 || p.PidsMax < 0 || p.CPUMax < 0 || p.CPUWeight > 10000 {
			return fmt.Errorf("%w: profile %q: limits must not be negative and cpu_weight at most 10000", ErrConfig, name)
		}
		if _, err := pool.ParseTimeoutAction(p.TimeoutAction); err != nil || p.InterruptGrace <= 0 {
			return fmt.Errorf("%w: profile %q: timeout_action must be \"interrupt\" or \"kill\" and interrupt_grace positive", ErrConfig, name)
		}
		if p.FilesMaxBytes <= 0 {
			return fmt.Errorf("%w: profile %q: files_max_bytes must be positive", ErrConfig, name)
		}
		if p.Spares < 0 {
			return fmt.Errorf("%w: profile %q: spares must not be negative", ErrConfig, name)
		}
		for _, m := range p.Preload {
			if !kernel.ValidModuleName(m) {
				return fmt.Errorf("%w: profile %q: preload %q is not a module name (dotted identifiers, e.g. \"email.mime\")", ErrConfig, name, m)
			}
		}
	}
	return nil
}

// Modes lists the configured profile names, sorted: the modes a request may name.
func (c *Config) Modes() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Policies are the pool's cell policies by mode.
func (c *Config) Policies() map[string]pool.CellPolicy {
	out := make(map[string]pool.CellPolicy, len(c.Profiles))
	for name, p := range c.Profiles {
		out[name] = pool.CellPolicy{TimeoutAction: pool.TimeoutAction(p.TimeoutAction), InterruptGrace: p.InterruptGrace, Persist: p.Persist, FilesMaxBytes: p.FilesMaxBytes}
	}
	return out
}

// Warm are the pool's warm-start settings by mode: each profile's spares
// and preload, and a digest of the rest of the profile, so a reload that
// changes a profile replaces its spares. With per-owner uids there are no
// spares (a spare's uid is leased before its owner is known).
func (c *Config) Warm() map[string]pool.Warm {
	out := make(map[string]pool.Warm, len(c.Profiles))
	for name, p := range c.Profiles {
		w := pool.Warm{Spares: p.Spares, Preload: p.Preload}
		if c.Users.PerOwner {
			w.Spares = 0
		}
		rest := p
		rest.Spares, rest.Preload = 0, nil
		w.Profile = fmt.Sprintf("%+v", rest)
		out[name] = w
	}
	return out
}

// Complete fills what is still empty with its default (Socket:
// DefaultSocket under getenv; StateDir: beside the socket; the cgroup
// parent: derived from the state dir), makes the paths absolute and
// validates the result.
func (c *Config) Complete(getenv func(string) string) error {
	if c.Socket == "" {
		c.Socket = DefaultSocket(getenv)
	}
	if c.StateDir == "" {
		c.StateDir = StateDirBeside(c.Socket)
	}
	var err error
	if c.Socket, err = filepath.Abs(c.Socket); err != nil {
		return fmt.Errorf("%w: socket: %v", ErrConfig, err)
	}
	if c.StateDir, err = filepath.Abs(c.StateDir); err != nil {
		return fmt.Errorf("%w: state dir: %v", ErrConfig, err)
	}
	if c.Cgroup.Parent == "" {
		c.Cgroup.Parent = cgroup.ParentFor(c.StateDir)
	}
	if hclog.LevelFromString(c.LogLevel) == hclog.NoLevel {
		return fmt.Errorf("%w: log level %q is not one of trace, debug, info, warn, error", ErrConfig, c.LogLevel)
	}
	return c.Validate()
}
