package daemon

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/kernpool/kernpool/kernel"
)

// fileConfig is the HCL file's shape. Sizes and durations are kept as
// expressions so that a bad value is reported at its own file:line.
type fileConfig struct {
	Isolation       hcl.Expression `hcl:"isolation,optional"`
	Socket          *string        `hcl:"socket,optional"`
	StateDir        *string        `hcl:"state_dir,optional"`
	LogLevel        *string        `hcl:"log_level,optional"`
	LogJSON         *bool          `hcl:"log_json,optional"`
	Interpreter     *string        `hcl:"interpreter,optional"`
	IdleTimeout     hcl.Expression `hcl:"idle_timeout,optional"`
	CellTimeout     hcl.Expression `hcl:"cell_timeout,optional"`
	MaxCellTimeout  hcl.Expression `hcl:"max_cell_timeout,optional"`
	MaxKernels      *int           `hcl:"max_kernels,optional"`
	MaxToolCalls    *int           `hcl:"max_tool_calls,optional"`
	ToolCallTimeout hcl.Expression `hcl:"tool_call_timeout,optional"`
	DrainGrace      hcl.Expression `hcl:"drain_grace,optional"`
	SocketGroup     *string        `hcl:"socket_group,optional"`
	MetricsListen   *string        `hcl:"metrics_listen,optional"`
	KernelsPerOwner *int           `hcl:"max_kernels_per_owner,optional"`
	CellsPerMinute  *int           `hcl:"max_cells_per_minute_per_owner,optional"`
	AuditLog        *string        `hcl:"audit_log,optional"`
	AuditCode       *bool          `hcl:"audit_code,optional"`
	AuditMaxSize    hcl.Expression `hcl:"audit_max_size,optional"`
	AuditKeep       *int           `hcl:"audit_keep,optional"`
	CheckpointCap   hcl.Expression `hcl:"checkpoint_max_bytes_per_owner,optional"`
	CheckpointKeep  hcl.Expression `hcl:"checkpoint_retention,optional"`
	CheckpointTime  hcl.Expression `hcl:"checkpoint_timeout,optional"`
	CheckpointIdle  hcl.Expression `hcl:"checkpoint_idle,optional"`
	StoreURL        *string        `hcl:"checkpoint_store,optional"`
	StoreEndpoint   *string        `hcl:"checkpoint_store_endpoint,optional"`
	StoreAllowHTTP  *bool          `hcl:"checkpoint_store_allow_http,optional"`
	Listen          *string        `hcl:"listen,optional"`
	TLSCert         *string        `hcl:"tls_cert,optional"`
	TLSKey          *string        `hcl:"tls_key,optional"`
	TLSClientCA     *string        `hcl:"tls_client_ca,optional"`
	ListenMaxConns  *int           `hcl:"listen_max_conns,optional"`
	ListenMaxHeader hcl.Expression `hcl:"listen_max_header_bytes,optional"`
	ListenHeaderTO  hcl.Expression `hcl:"listen_header_timeout,optional"`
	ListenIdleTO    hcl.Expression `hcl:"listen_idle_timeout,optional"`
	DrainOnTerm     *bool          `hcl:"drain_on_term,optional"`
	MaxSessions     *int           `hcl:"max_sessions,optional"`
	OwnerSessions   *int           `hcl:"max_sessions_per_owner,optional"`
	SessionIdle     hcl.Expression `hcl:"session_idle_timeout,optional"`
	MaxEnvNames     *int           `hcl:"max_env_names,optional"`
	MaxEnvBytes     hcl.Expression `hcl:"max_env_bytes,optional"`
	FleetRedis      *string        `hcl:"fleet_redis,optional"`
	NodeName        *string        `hcl:"node_name,optional"`
	AdvertiseURL    *string        `hcl:"advertise_url,optional"`
	FleetHeartbeat  hcl.Expression `hcl:"fleet_heartbeat,optional"`
	NodeTokenFile   *string        `hcl:"fleet_node_token_file,optional"`
	NodeCA          *string        `hcl:"fleet_node_ca,optional"`
	K8sService      *string        `hcl:"fleet_kubernetes_service,optional"`
	K8sNamespace    *string        `hcl:"fleet_kubernetes_namespace,optional"`
	Tokens          []fileToken    `hcl:"token,block"`
	ClientCerts     []fileCert     `hcl:"client_cert,block"`
	Env             *fileEnv       `hcl:"env,block"`
	Output          *fileOutput    `hcl:"output,block"`
	Cgroup          *fileCgroup    `hcl:"cgroup,block"`
	Users           *fileUsers     `hcl:"users,block"`
	Profiles        []fileProfile  `hcl:"profile,block"`
	Ceiling         *fileCeiling   `hcl:"ceiling,block"`
}

// fileToken is a token block: token "NAME" { sha256 = "..." ... }.
type fileToken struct {
	Name          string   `hcl:"name,label"`
	SHA256        string   `hcl:"sha256"`
	Admin         *bool    `hcl:"admin,optional"`
	Owners        []string `hcl:"owners,optional"`
	OwnerPrefixes []string `hcl:"owner_prefixes,optional"`
}

// fileCert is a client_cert block, labeled with the certificate's CN.
type fileCert struct {
	Name          string   `hcl:"name,label"`
	Admin         *bool    `hcl:"admin,optional"`
	Owners        []string `hcl:"owners,optional"`
	OwnerPrefixes []string `hcl:"owner_prefixes,optional"`
}

type fileEnv struct {
	Passthrough []string  `hcl:"passthrough,optional"`
	Refuse      *[]string `hcl:"refuse,optional"`
}

type fileOutput struct {
	RedactPatterns *bool          `hcl:"redact_patterns,optional"`
	InlineCap      hcl.Expression `hcl:"inline_cap,optional"`
	StderrCap      hcl.Expression `hcl:"stderr_cap,optional"`
	SpillCap       hcl.Expression `hcl:"spill_cap,optional"`
	SpillQuota     hcl.Expression `hcl:"spill_quota,optional"`
}

type fileCgroup struct {
	Parent  *string `hcl:"parent,optional"`
	Enabled *bool   `hcl:"enabled,optional"`
}

type fileUsers struct {
	Enabled  *bool          `hcl:"enabled,optional"`
	UIDRange hcl.Expression `hcl:"uid_range,optional"`
	PerOwner *bool          `hcl:"per_owner,optional"`
}

type fileProfile struct {
	Name           string         `hcl:"name,label"`
	MemoryMax      hcl.Expression `hcl:"memory_max,optional"`
	MemorySwapMax  hcl.Expression `hcl:"memory_swap_max,optional"`
	PidsMax        *int64         `hcl:"pids_max,optional"`
	CPUMax         *float64       `hcl:"cpu_max,optional"`
	CPUWeight      *uint64        `hcl:"cpu_weight,optional"`
	Passthrough    []string       `hcl:"passthrough,optional"`
	Network        *bool          `hcl:"network,optional"`
	PIDNamespace   *bool          `hcl:"pid_namespace,optional"`
	PrivateTmp     *bool          `hcl:"private_tmp,optional"`
	TmpSize        hcl.Expression `hcl:"tmp_size,optional"`
	PtyMax         *int           `hcl:"pty_max,optional"`
	MemoryMerge    *bool          `hcl:"memory_merge,optional"`
	TimeoutAction  *string        `hcl:"timeout_action,optional"`
	InterruptGrace hcl.Expression `hcl:"interrupt_grace,optional"`
	Spares         *int           `hcl:"spares,optional"`
	Preload        []string       `hcl:"preload,optional"`
	Persist        *bool          `hcl:"persist,optional"`
	FilesMaxBytes  hcl.Expression `hcl:"files_max_bytes,optional"`
}

type fileCeiling struct {
	MemoryMax hcl.Expression `hcl:"memory_max,optional"`
	PidsMax   *int64         `hcl:"pids_max,optional"`
	CPUMax    *float64       `hcl:"cpu_max,optional"`
}

// apply overlays the file's values on cfg.
func (f *fileConfig) apply(cfg *Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	diags = append(diags, isolationAttr(f.Isolation, &cfg.Isolation)...)
	setStr(&cfg.Socket, f.Socket)
	setStr(&cfg.StateDir, f.StateDir)
	setStr(&cfg.LogLevel, f.LogLevel)
	setStr(&cfg.Interpreter, f.Interpreter)
	setBool(&cfg.LogJSON, f.LogJSON)
	setInt(&cfg.MaxKernels, f.MaxKernels)
	setInt(&cfg.MaxToolCalls, f.MaxToolCalls)
	diags = append(diags, durationAttr(f.IdleTimeout, "idle_timeout", &cfg.IdleTimeout)...)
	diags = append(diags, durationAttr(f.CellTimeout, "cell_timeout", &cfg.CellTimeout)...)
	diags = append(diags, durationAttr(f.MaxCellTimeout, "max_cell_timeout", &cfg.MaxCellTimeout)...)
	diags = append(diags, durationAttr(f.ToolCallTimeout, "tool_call_timeout", &cfg.ToolCallTimeout)...)
	diags = append(diags, durationAttr(f.DrainGrace, "drain_grace", &cfg.DrainGrace)...)
	setStr(&cfg.SocketGroup, f.SocketGroup)
	setStr(&cfg.MetricsListen, f.MetricsListen)
	setInt(&cfg.MaxKernelsPerOwner, f.KernelsPerOwner)
	setInt(&cfg.MaxCellsPerMinutePerOwner, f.CellsPerMinute)
	setStr(&cfg.Audit.Path, f.AuditLog)
	setBool(&cfg.Audit.IncludeCode, f.AuditCode)
	diags = append(diags, sizeAttr(f.AuditMaxSize, "audit_max_size", &cfg.Audit.MaxSize)...)
	setInt(&cfg.Audit.Keep, f.AuditKeep)
	diags = append(diags, sizeAttr(f.CheckpointCap, "checkpoint_max_bytes_per_owner", &cfg.Checkpoints.MaxBytesPerOwner)...)
	diags = append(diags, durationAttr(f.CheckpointKeep, "checkpoint_retention", &cfg.Checkpoints.Retention)...)
	diags = append(diags, durationAttr(f.CheckpointTime, "checkpoint_timeout", &cfg.Checkpoints.Timeout)...)
	diags = append(diags, durationAttr(f.CheckpointIdle, "checkpoint_idle", &cfg.Checkpoints.Idle)...)
	setStr(&cfg.CheckpointStore.URL, f.StoreURL)
	setStr(&cfg.CheckpointStore.Endpoint, f.StoreEndpoint)
	setBool(&cfg.CheckpointStore.AllowHTTP, f.StoreAllowHTTP)
	setInt(&cfg.Sessions.MaxSessions, f.MaxSessions)
	setInt(&cfg.Sessions.MaxSessionsPerOwner, f.OwnerSessions)
	diags = append(diags, durationAttr(f.SessionIdle, "session_idle_timeout", &cfg.Sessions.IdleTimeout)...)
	setInt(&cfg.Sessions.MaxEnvNames, f.MaxEnvNames)
	diags = append(diags, intSizeAttr(f.MaxEnvBytes, "max_env_bytes", &cfg.Sessions.MaxEnvBytes)...)
	diags = append(diags, f.applyNetwork(cfg)...)
	setStr(&cfg.Fleet.Redis, f.FleetRedis)
	setStr(&cfg.Fleet.NodeName, f.NodeName)
	setStr(&cfg.Fleet.AdvertiseURL, f.AdvertiseURL)
	diags = append(diags, durationAttr(f.FleetHeartbeat, "fleet_heartbeat", &cfg.Fleet.Heartbeat)...)
	setStr(&cfg.Fleet.NodeTokenFile, f.NodeTokenFile)
	setStr(&cfg.Fleet.NodeCA, f.NodeCA)
	setStr(&cfg.Fleet.KubernetesService, f.K8sService)
	setStr(&cfg.Fleet.KubernetesNamespace, f.K8sNamespace)
	if f.Env != nil {
		cfg.Env.Passthrough = nonEmpty(f.Env.Passthrough)
		if f.Env.Refuse != nil {
			// Present, even empty, replaces the default refusal list.
			cfg.Env.Refuse = append([]string{}, (*f.Env.Refuse)...)
		}
	}
	if o := f.Output; o != nil {
		setBool(&cfg.Output.RedactPatterns, o.RedactPatterns)
		diags = append(diags, intSizeAttr(o.InlineCap, "inline_cap", &cfg.Output.InlineCap)...)
		diags = append(diags, intSizeAttr(o.StderrCap, "stderr_cap", &cfg.Output.StderrCap)...)
		diags = append(diags, intSizeAttr(o.SpillCap, "spill_cap", &cfg.Output.SpillCap)...)
		diags = append(diags, sizeAttr(o.SpillQuota, "spill_quota", &cfg.Output.SpillQuota)...)
	}
	if c := f.Cgroup; c != nil {
		setStr(&cfg.Cgroup.Parent, c.Parent)
		setBool(&cfg.Cgroup.Enabled, c.Enabled)
	}
	if u := f.Users; u != nil {
		setBool(&cfg.Users.Enabled, u.Enabled)
		setBool(&cfg.Users.PerOwner, u.PerOwner)
		diags = append(diags, uidRangeAttr(u.UIDRange, &cfg.Users)...)
	}
	diags = append(diags, f.applyProfiles(cfg)...)
	if c := f.Ceiling; c != nil {
		diags = append(diags, sizeAttr(c.MemoryMax, "memory_max", &cfg.Ceiling.MemoryMax)...)
		setInt64(&cfg.Ceiling.PidsMax, c.PidsMax)
		setFloat(&cfg.Ceiling.CPUMax, c.CPUMax)
	}
	return diags
}

// applyNetwork overlays the network listener's settings and drain_on_term.
func (f *fileConfig) applyNetwork(cfg *Config) hcl.Diagnostics {
	n := &cfg.Network
	setStr(&n.Listen, f.Listen)
	setStr(&n.TLSCert, f.TLSCert)
	setStr(&n.TLSKey, f.TLSKey)
	setStr(&n.TLSClientCA, f.TLSClientCA)
	setInt(&n.MaxConns, f.ListenMaxConns)
	setBool(&cfg.DrainOnTerm, f.DrainOnTerm)
	diags := intSizeAttr(f.ListenMaxHeader, "listen_max_header_bytes", &n.MaxHeaderBytes)
	diags = append(diags, durationAttr(f.ListenHeaderTO, "listen_header_timeout", &n.HeaderTimeout)...)
	diags = append(diags, durationAttr(f.ListenIdleTO, "listen_idle_timeout", &n.IdleTimeout)...)
	for _, t := range f.Tokens {
		n.Tokens = append(n.Tokens, Credential{Name: t.Name, SHA256: strings.ToLower(t.SHA256), Admin: t.Admin != nil && *t.Admin,
			Owners: nonEmpty(t.Owners), OwnerPrefixes: nonEmpty(t.OwnerPrefixes)})
	}
	for _, c := range f.ClientCerts {
		n.ClientCerts = append(n.ClientCerts, Credential{Name: c.Name, Admin: c.Admin != nil && *c.Admin,
			Owners: nonEmpty(c.Owners), OwnerPrefixes: nonEmpty(c.OwnerPrefixes)})
	}
	return diags
}

func (f *fileConfig) applyProfiles(cfg *Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[string]bool{}
	for _, fp := range f.Profiles {
		if seen[fp.Name] {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate profile",
				Detail:   fmt.Sprintf("profile %q is defined more than once", fp.Name),
				Subject:  fp.MemoryMax.Range().Ptr(),
			})
			continue
		}
		seen[fp.Name] = true
		// A profile starts from the built-in default profile, so a block
		// that only sets pids_max keeps sensible memory and CPU limits.
		p := defaultProfile()
		diags = append(diags, sizeAttr(fp.MemoryMax, "memory_max", &p.MemoryMax)...)
		diags = append(diags, sizeAttr(fp.MemorySwapMax, "memory_swap_max", &p.MemorySwapMax)...)
		setInt64(&p.PidsMax, fp.PidsMax)
		setFloat(&p.CPUMax, fp.CPUMax)
		if fp.CPUWeight != nil {
			p.CPUWeight = *fp.CPUWeight
		}
		p.Passthrough = nonEmpty(fp.Passthrough)
		setBool(&p.Network, fp.Network)
		setBool(&p.PIDNamespace, fp.PIDNamespace)
		setBool(&p.PrivateTmp, fp.PrivateTmp)
		diags = append(diags, sizeAttr(fp.TmpSize, "tmp_size", &p.TmpSize)...)
		setInt(&p.PtyMax, fp.PtyMax)
		setBool(&p.MemoryMerge, fp.MemoryMerge)
		setStr(&p.TimeoutAction, fp.TimeoutAction)
		diags = append(diags, durationAttr(fp.InterruptGrace, "interrupt_grace", &p.InterruptGrace)...)
		setInt(&p.Spares, fp.Spares)
		if fp.Preload != nil {
			p.Preload = nonEmpty(fp.Preload)
		}
		setBool(&p.Persist, fp.Persist)
		diags = append(diags, sizeAttr(fp.FilesMaxBytes, "files_max_bytes", &p.FilesMaxBytes)...)
		cfg.Profiles[fp.Name] = p
	}
	return diags
}

// sizeAttr decodes a size: a number of bytes or a string such as "64MiB".
func sizeAttr(expr hcl.Expression, name string, dst *int64) hcl.Diagnostics {
	return scalarAttr(expr, name, "a size such as \"64MiB\" or a number of bytes", func(s string) error {
		n, err := ParseSize(s)
		if err == nil {
			*dst = n
		}
		return err
	})
}

func intSizeAttr(expr hcl.Expression, name string, dst *int) hcl.Diagnostics {
	var n int64
	d := sizeAttr(expr, name, &n)
	if !d.HasErrors() && n != 0 {
		*dst = int(n)
	}
	return d
}

// durationAttr decodes a Go duration string ("30m") or a number of seconds.
func durationAttr(expr hcl.Expression, name string, dst *time.Duration) hcl.Diagnostics {
	return scalarAttr(expr, name, "a duration such as \"30s\" or \"5m\", or a number of seconds", func(s string) error {
		d, err := ParseDuration(s)
		if err == nil {
			*dst = d
		}
		return err
	})
}

// isolationAttr decodes the isolation mode ("sandbox" or "process").
func isolationAttr(expr hcl.Expression, dst *kernel.IsolationMode) hcl.Diagnostics {
	return scalarAttr(expr, "isolation", `"sandbox" or "process"`, func(s string) error {
		m, err := kernel.ParseIsolationMode(s)
		if err == nil {
			*dst = m
		}
		return err
	})
}

func uidRangeAttr(expr hcl.Expression, u *UsersConfig) hcl.Diagnostics {
	return scalarAttr(expr, "uid_range", "a range such as \"60000-60999\"", func(s string) error {
		lo, hi, ok := strings.Cut(s, "-")
		first, err1 := strconv.Atoi(strings.TrimSpace(lo))
		last, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if !ok || err1 != nil || err2 != nil || first <= 0 || last < first {
			return fmt.Errorf("%q is not FIRST-LAST with 0 < FIRST <= LAST", s)
		}
		u.UIDFirst, u.UIDLast = first, last
		return nil
	})
}

// scalarAttr evaluates an optional attribute to its string form (numbers
// are rendered in decimal) and hands it to parse; problems carry the range.
func scalarAttr(expr hcl.Expression, name, want string, parse func(string) error) hcl.Diagnostics {
	if expr == nil {
		return nil
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() || v.IsNull() {
		return diags
	}
	var s string
	if d := gohcl.DecodeExpression(expr, nil, &s); d.HasErrors() {
		return hcl.Diagnostics{badValue(expr, name, want, "it is not a string or a number")}
	}
	if err := parse(s); err != nil {
		return hcl.Diagnostics{badValue(expr, name, want, strings.TrimPrefix(err.Error(), ErrConfig.Error()+": "))}
	}
	return nil
}

func badValue(expr hcl.Expression, name, want, why string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid value for " + name,
		Detail:   fmt.Sprintf("%s must be %s: %s.", name, want, why),
		Subject:  expr.Range().Ptr(),
	}
}

func setStr(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func setBool(dst *bool, v *bool) {
	if v != nil {
		*dst = *v
	}
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func setInt64(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

func setFloat(dst *float64, v *float64) {
	if v != nil {
		*dst = *v
	}
}

// nonEmpty returns nil for an empty list, so "absent" and "[]" compare equal.
func nonEmpty(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	return list
}
