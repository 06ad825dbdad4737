package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/units"
)

// Doctor describes cfg (completed) and what the host offers for it: the
// default interpreter, the settings, and the isolation this host gives
// (probed only when no daemon holds the state dir). version names the
// binary. ok is false when the isolation cfg asks for is not available.
func Doctor(ctx context.Context, cfg *Config, version string) (report string, ok bool) {
	var b strings.Builder
	interp, err := resolveInterpreter(ctx, cfg.Interpreter, hclog.NewNullLogger())
	if err != nil {
		fmt.Fprintf(&b, "interpreter:  NOT FOUND: %v\n", err)
	} else {
		fmt.Fprintf(&b, "interpreter:  resolves to %s\n", interp)
	}
	fmt.Fprintf(&b, "kernpool %s (%s/%s, %s)\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "uid:          %d (gid %d)\n", os.Getuid(), os.Getgid())
	fmt.Fprintf(&b, "isolation:    %s (modes: %s)\n", cfg.Isolation, isolationModeNames())
	fmt.Fprintf(&b, "socket:       %s\n", cfg.Socket)
	fmt.Fprintf(&b, "state dir:    %s\n", cfg.StateDir)
	configured := cfg.Interpreter
	if configured == "" {
		configured = "(python3 on PATH, resolved at start)"
	}
	fmt.Fprintf(&b, "configured:   interpreter %s\n", configured)
	fmt.Fprintf(&b, "timeouts:     idle %s, cell %s (max %s), tool call %s, drain %s\n",
		cfg.IdleTimeout, cfg.CellTimeout, cfg.MaxCellTimeout, cfg.ToolCallTimeout, cfg.DrainGrace)
	fmt.Fprintf(&b, "kernels:      max %d, tool calls per cell %d\n", cfg.MaxKernels, cfg.MaxToolCalls)
	fmt.Fprintf(&b, "cgroup:       parent %q, enabled %t\n", cfg.Cgroup.Parent, cfg.Cgroup.Enabled)
	fmt.Fprintf(&b, "users:        enabled %t, uids %d-%d, per owner %t\n",
		cfg.Users.Enabled, cfg.Users.UIDFirst, cfg.Users.UIDLast, cfg.Users.PerOwner)
	for _, name := range sortedProfileNames(cfg) {
		p := cfg.Profiles[name]
		fmt.Fprintf(&b, "profile %-6q memory %s, swap %s, pids %d, cpu %g, weight %d, network %t, tmp %s, spares %d, preload %s\n",
			name, formatLimit(p.MemoryMax), formatSwap(p.MemorySwapMax), p.PidsMax, p.CPUMax, p.CPUWeight, p.Network, formatLimit(p.TmpSize),
			cfg.Warm()[name].Spares, preloadText(p.Preload))
	}
	iso, ok := isolationReport(ctx, cfg, interp)
	b.WriteString(iso)
	return b.String(), ok
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

func sortedProfileNames(cfg *Config) []string {
	names := make([]string, 0, len(cfg.Profiles))
	for n := range cfg.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// preloadText renders a preload list for doctor ("none" when empty).
func preloadText(mods []string) string {
	if len(mods) == 0 {
		return "none"
	}
	return strings.Join(mods, ",")
}
