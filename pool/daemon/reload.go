package daemon

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool"
)

// reloader applies a reread configuration (Daemon.Reload): profile
// limits (for kernels started from now on; running kernels keep their
// cgroup limits), cell policies (timeout_action, interrupt_grace and
// persist, for cells and teardowns from now on), spares and preload, and
// the per-owner quotas. A configuration whose profile changes cannot be
// applied is refused whole: the old one stays. Other changed settings
// are logged as needing a restart.
type reloader struct {
	mu    sync.Mutex
	cur   *Config
	pool  *pool.Pool
	seams seams
	net   *netAuth // nil without a network listener
	log   hclog.Logger
}

func (r *reloader) current() *Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// apply applies next (see reloader).
func (r *reloader) apply(next *Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The listener's credentials and TLS files are reread even when the
	// config is unchanged: a rotated certificate keeps its path.
	if err := r.reloadNetwork(next); err != nil {
		return err
	}
	changed, restart, unused := diffConfig(r.cur, next, r.net != nil)
	if len(unused) > 0 {
		r.log.Warn("reload: credentials changed but not in use: no network listener runs (listen is not set); a restart with listen set reads them", "settings", strings.Join(unused, "; "))
	}
	if len(changed) == 0 && len(restart) == 0 {
		if len(unused) == 0 {
			r.log.Info("reload: nothing changed")
		}
		return nil
	}
	// The ceiling is checked by the pool and the isolator alike; it stays
	// as it runs (a restart changes it), so both keep agreeing.
	limits := *next
	limits.Ceiling = r.cur.Ceiling
	if err := r.seams.SetLimits(&limits); err != nil {
		return err
	}
	if err := r.pool.SetQuotas(quotas(next)); err != nil {
		return err
	}
	if err := r.pool.SetPolicies(next.Policies()); err != nil {
		return err
	}
	// What is applied becomes current; what needs a restart stays as it runs.
	applied := *r.cur
	applied.Profiles = withPassthrough(next.Profiles, r.cur.Profiles)
	applied.MaxKernelsPerOwner, applied.MaxCellsPerMinutePerOwner = next.MaxKernelsPerOwner, next.MaxCellsPerMinutePerOwner
	applied.DrainOnTerm = next.DrainOnTerm
	applied.Network = withCredentials(r.cur.Network, next.Network, r.net != nil)
	// Spares of a changed profile are replaced (pool.SetWarm).
	if err := r.pool.SetWarm(applied.Warm()); err != nil {
		return err
	}
	r.cur = &applied
	if len(changed) > 0 {
		r.log.Info("reload applied to new kernels and requests", "changed", strings.Join(changed, "; "))
	}
	if len(restart) > 0 {
		r.log.Warn("reload: these settings changed but only a restart applies them", "settings", strings.Join(restart, ", "))
	}
	return nil
}

// diffConfig describes what changed between two configurations: the
// reloadable settings (profile limits, policies, spares, quotas, and the
// listener's credentials when one runs) with old and new values, the
// names of the others that differ, and the credential changes that no
// listener uses (listening false).
func diffConfig(old, next *Config, listening bool) (changed, restart, unused []string) {
	for _, name := range slices.Sorted(maps.Keys(next.Profiles)) {
		o, n := old.Profiles[name], next.Profiles[name]
		if lo, ln := profileLimitsText(o), profileLimitsText(n); lo != ln {
			changed = append(changed, fmt.Sprintf("profile %q: %s -> %s", name, lo, ln))
		}
		if !reflect.DeepEqual(o.Passthrough, n.Passthrough) {
			restart = append(restart, fmt.Sprintf("profile %q passthrough", name))
		}
		if lo, ln := profilePolicyText(o), profilePolicyText(n); lo != ln {
			changed = append(changed, fmt.Sprintf("profile %q: %s -> %s", name, lo, ln))
		}
		if o.Spares != n.Spares || !reflect.DeepEqual(o.Preload, n.Preload) {
			changed = append(changed, fmt.Sprintf("profile %q: spares %d, preload %v -> spares %d, preload %v", name, o.Spares, o.Preload, n.Spares, n.Preload))
		}
	}
	if old.MaxKernelsPerOwner != next.MaxKernelsPerOwner {
		changed = append(changed, fmt.Sprintf("max_kernels_per_owner: %d -> %d", old.MaxKernelsPerOwner, next.MaxKernelsPerOwner))
	}
	if old.MaxCellsPerMinutePerOwner != next.MaxCellsPerMinutePerOwner {
		changed = append(changed, fmt.Sprintf("max_cells_per_minute_per_owner: %d -> %d", old.MaxCellsPerMinutePerOwner, next.MaxCellsPerMinutePerOwner))
	}
	if old.DrainOnTerm != next.DrainOnTerm {
		changed = append(changed, fmt.Sprintf("drain_on_term: %t -> %t", old.DrainOnTerm, next.DrainOnTerm))
	}
	switch creds := credentialChanges(old.Network, next.Network); {
	case !listening:
		unused = creds
	case credentialsReload(old.Network, next.Network):
		changed = append(changed, creds...)
	} // else turning TLS or client certificates on or off: restart lists it
	// Everything else: compare with the reloadable parts made equal.
	a, b := *old, *next
	a.Profiles, a.MaxKernelsPerOwner, a.MaxCellsPerMinutePerOwner, a.DrainOnTerm = nil, 0, 0, false
	b.Profiles, b.MaxKernelsPerOwner, b.MaxCellsPerMinutePerOwner, b.DrainOnTerm = nil, 0, 0, false
	b.Network = withCredentials(b.Network, a.Network, true)
	return changed, append(restart, differingKeys(reflect.ValueOf(a), reflect.ValueOf(b), "")...), unused
}

// differingKeys names, as the config file spells them, the settings of two
// Config values (or of their nested blocks) that differ.
func differingKeys(a, b reflect.Value, prefix string) []string {
	var out []string
	t := a.Type()
	for i := range t.NumField() {
		name := prefix + t.Field(i).Name
		fa, fb := a.Field(i), b.Field(i)
		if reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			continue
		}
		if fa.Kind() == reflect.Struct {
			out = append(out, differingKeys(fa, fb, name+".")...)
			continue
		}
		if key := configKey(name); !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// configKeys are the config file's names for the Config fields whose name
// is not their key in snake case (see configKey).
var configKeys = map[string]string{
	"File":                         "--config (the config file itself)",
	"LogJSON":                      "log_json",
	"Audit.Path":                   "audit_log",
	"Audit.IncludeCode":            "audit_code",
	"Audit.MaxSize":                "audit_max_size",
	"Audit.Keep":                   "audit_keep",
	"Users.UIDFirst":               "users.uid_range",
	"Users.UIDLast":                "users.uid_range",
	"Checkpoints.MaxBytesPerOwner": "checkpoint_max_bytes_per_owner",
	"Checkpoints.Retention":        "checkpoint_retention",
	"Checkpoints.Timeout":          "checkpoint_timeout",
	"Cgroup.Parent":                "cgroup.parent",
	"CPUMax":                       "cpu_max",
	"Checkpoints.Idle":             "checkpoint_idle",
	"Sessions.MaxSessions":         "max_sessions",
	"Sessions.MaxSessionsPerOwner": "max_sessions_per_owner",
	"Sessions.IdleTimeout":         "session_idle_timeout",
	"Sessions.MaxEnvNames":         "max_env_names",
	"Sessions.MaxEnvBytes":         "max_env_bytes",
	"CheckpointStore.URL":          "checkpoint_store",
	"CheckpointStore.Endpoint":     "checkpoint_store_endpoint",
	"CheckpointStore.AllowHTTP":    "checkpoint_store_allow_http",
	"Network.Listen":               "listen",
	"Network.TLSCert":              "tls_cert",
	"Network.TLSKey":               "tls_key",
	"Network.TLSClientCA":          "tls_client_ca",
	"Network.Tokens":               "token",
	"Network.ClientCerts":          "client_cert",
	"Network.MaxConns":             "listen_max_conns",
	"Network.MaxHeaderBytes":       "listen_max_header_bytes",
	"Network.HeaderTimeout":        "listen_header_timeout",
	"Network.IdleTimeout":          "listen_idle_timeout",
	"Fleet.Redis":                  "fleet_redis",
	"Fleet.NodeName":               "node_name",
	"Fleet.AdvertiseURL":           "advertise_url",
	"Fleet.Heartbeat":              "fleet_heartbeat",
	"Fleet.NodeTokenFile":          "fleet_node_token_file",
	"Fleet.NodeCA":                 "fleet_node_ca",
	"Fleet.KubernetesService":      "fleet_kubernetes_service",
	"Fleet.KubernetesNamespace":    "fleet_kubernetes_namespace",
}

// configKey is the config file's name of the Config field at path
// ("Cgroup.Parent" is cgroup.parent, "IdleTimeout" idle_timeout).
func configKey(path string) string {
	if k, ok := configKeys[path]; ok {
		return k
	}
	parts := strings.Split(path, ".")
	for i, p := range parts {
		if k, ok := configKeys[p]; ok {
			parts[i] = k
			continue
		}
		var b strings.Builder
		for j, r := range p {
			if unicode.IsUpper(r) && j > 0 && !unicode.IsUpper(rune(p[j-1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, ".")
}

// withPassthrough is profiles with the running passthrough lists kept
// (envscrub applies them at start only).
func withPassthrough(profiles, running map[string]Profile) map[string]Profile {
	out := make(map[string]Profile, len(profiles))
	for name, p := range profiles {
		p.Passthrough = running[name].Passthrough
		out[name] = p
	}
	return out
}

func profilePolicyText(p Profile) string {
	return fmt.Sprintf("timeout_action %q, interrupt_grace %s, persist %t, files_max_bytes %d", p.TimeoutAction, p.InterruptGrace, p.Persist, p.FilesMaxBytes)
}

func profileLimitsText(p Profile) string {
	return fmt.Sprintf("memory %s, swap %s, pids %d, cpu %g, weight %d",
		formatLimit(p.MemoryMax), formatSwap(p.MemorySwapMax), p.PidsMax, p.CPUMax, p.CPUWeight)
}
