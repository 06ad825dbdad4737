package daemon

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/units"
)

// Doctor describes the settings and what the host offers for them: the
// default interpreter, the settings, and the isolation this host gives
// (probed only when no daemon holds the state dir). live is what a running
// daemon reported (GET /v1/settings): its settings are the ones in force,
// so they are printed instead of cfg's (the doctor's own flags and config
// file, completed); nil when no daemon answered. version names the binary.
// ok is false when the isolation cfg asks for is not available.
func Doctor(ctx context.Context, cfg *Config, live *api.Settings, version string) (report string, ok bool) {
	var b strings.Builder
	interp, err := resolveInterpreter(ctx, cfg.Interpreter, hclog.NewNullLogger())
	s := live
	switch {
	case live != nil:
		fmt.Fprintf(&b, "settings:     the running daemon's (GET /v1/settings on %s)\n", cfg.Socket)
		fmt.Fprintf(&b, "interpreter:  %s (the daemon's default)\n", live.Interpreter)
	case err != nil:
		fmt.Fprintf(&b, "settings:     this command's flags and config file (no daemon answered)\n")
		fmt.Fprintf(&b, "interpreter:  NOT FOUND: %v\n", err)
	default:
		fmt.Fprintf(&b, "settings:     this command's flags and config file (no daemon answered)\n")
		fmt.Fprintf(&b, "interpreter:  resolves to %s\n", interp)
	}
	if s == nil {
		s = SettingsOf(cfg, cmp.Or(cfg.Interpreter, "(python3 on PATH, resolved at start)"))
	}
	fmt.Fprintf(&b, "kernpool %s (%s/%s, %s)\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "uid:          %d (gid %d)\n", os.Getuid(), os.Getgid())
	writeSettings(&b, s)
	if live != nil {
		// Probing builds an isolator, which sweeps its cgroup parent: never
		// beside a running daemon, whose state dir and parent may differ
		// from this command's flags. The daemon's own line says what it has.
		b.WriteString("isolation:    not probed: a daemon is running (see the daemon line below)\n")
		return b.String(), true
	}
	iso, ok := isolationReport(ctx, cfg, interp)
	b.WriteString(iso)
	return b.String(), ok
}

// writeSettings prints the settings part of doctor's report.
func writeSettings(b *strings.Builder, s *api.Settings) {
	fmt.Fprintf(b, "isolation:    %s (modes: %s)\n", s.Isolation, isolationModeNames())
	fmt.Fprintf(b, "socket:       %s\n", s.Socket)
	fmt.Fprintf(b, "state dir:    %s\n", s.StateDir)
	fmt.Fprintf(b, "configured:   interpreter %s\n", s.Interpreter)
	fmt.Fprintf(b, "timeouts:     idle %s, cell %s (max %s), tool call %s, drain %s\n",
		time.Duration(s.IdleTimeout), time.Duration(s.CellTimeout), time.Duration(s.MaxCellTimeout),
		time.Duration(s.ToolCallTimeout), time.Duration(s.DrainGrace))
	fmt.Fprintf(b, "kernels:      max %d, tool calls per cell %d\n", s.MaxKernels, s.MaxToolCalls)
	fmt.Fprintf(b, "cgroup:       parent %q, enabled %t\n", s.CgroupParent, s.CgroupEnabled)
	fmt.Fprintf(b, "users:        enabled %t, uids %d-%d, per owner %t\n",
		s.Users.Enabled, s.Users.UIDFirst, s.Users.UIDLast, s.Users.PerOwner)
	for _, name := range slices.Sorted(maps.Keys(s.Profiles)) {
		p := s.Profiles[name]
		fmt.Fprintf(b, "profile %-6q memory %s, swap %s, pids %d, cpu %g, weight %d, network %t, tmp %s, spares %d, preload %s, memory merge %t\n",
			name, formatLimit(p.MemoryMax), formatSwap(p.MemorySwapMax), p.PidsMax, p.CPUMax, p.CPUWeight, p.Network, formatLimit(p.TmpSize),
			p.Spares, preloadText(p.Preload), p.MemoryMerge)
	}
}

// SettingsOf is what GET /v1/settings reports for cfg (completed), whose
// default interpreter resolved to interp.
func SettingsOf(cfg *Config, interp string) *api.Settings {
	s := &api.Settings{
		Socket: cfg.Socket, StateDir: cfg.StateDir, Interpreter: interp, Isolation: string(cfg.Isolation),
		IdleTimeout: api.Duration(cfg.IdleTimeout), CellTimeout: api.Duration(cfg.CellTimeout),
		MaxCellTimeout: api.Duration(cfg.MaxCellTimeout), ToolCallTimeout: api.Duration(cfg.ToolCallTimeout),
		DrainGrace: api.Duration(cfg.DrainGrace), MaxKernels: cfg.MaxKernels, MaxToolCalls: cfg.MaxToolCalls,
		CgroupParent: cfg.Cgroup.Parent, CgroupEnabled: cfg.Cgroup.Enabled,
		Users:    api.UserSettings{Enabled: cfg.Users.Enabled, UIDFirst: cfg.Users.UIDFirst, UIDLast: cfg.Users.UIDLast, PerOwner: cfg.Users.PerOwner},
		Profiles: make(map[string]api.ProfileSettings, len(cfg.Profiles)),
	}
	warm := cfg.Warm()
	for name, p := range cfg.Profiles {
		s.Profiles[name] = api.ProfileSettings{
			MemoryMax: p.MemoryMax, MemorySwapMax: p.MemorySwapMax, PidsMax: p.PidsMax, CPUMax: p.CPUMax,
			CPUWeight: p.CPUWeight, Network: p.Network, TmpSize: p.TmpSize, MemoryMerge: p.MemoryMerge, Spares: warm[name].Spares,
			Preload: append([]string{}, p.Preload...), FilesMaxBytes: p.FilesMaxBytes,
		}
	}
	return s
}

// isolationReport is doctor's isolation section. Building an isolator
// creates the pool parent and sweeps a dead instance's leftovers, so
// doctor does it only while it holds the state-dir lock: with a daemon
// running, that daemon's kernels are never touched and its own health
// report (printed by doctor) says what it has.
func isolationReport(ctx context.Context, cfg *Config, interp string) (string, bool) {
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return fmt.Sprintf("isolation:    cannot prepare the state dir to probe: %v\n", err), false
	}
	unlock, err := lockStateDir(cfg.StateDir)
	if err != nil {
		return fmt.Sprintf("isolation:    not probed: %v (see the daemon line below)\n", err), true
	}
	defer unlock()
	iso, err := isolate.New(isolateConfig(cfg, hclog.NewNullLogger()))
	if err != nil {
		return fmt.Sprintf("isolation:    FAILS: %v\n", err), false
	}
	defer iso.Close()
	out, ok := iso.Report().String(), true
	if interp != "" {
		check := func(path string) error { return iso.CheckAccess(path, "") }
		usable, err := usableInterpreter(ctx, interp, cfg.Interpreter != "", check, hclog.NewNullLogger())
		if err != nil {
			out += fmt.Sprintf("kernel python:     UNUSABLE by kernel uids: %v\n", err)
			ok = false
		} else {
			out += fmt.Sprintf("kernel python:     %s\n", usable)
		}
	}
	return out, ok
}

func isolationModeNames() string {
	var names []string
	for _, m := range kernel.IsolationModes() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}

func formatLimit(n int64) string { return units.FormatBytes(n) }

// formatSwap renders a swap limit, where 0 means no swap at all.
func formatSwap(n int64) string {
	if n == 0 {
		return "none"
	}
	return units.FormatBytes(n)
}

// preloadText renders a preload list for doctor ("none" when empty).
func preloadText(mods []string) string {
	if len(mods) == 0 {
		return "none"
	}
	return strings.Join(mods, ",")
}
