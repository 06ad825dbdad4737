package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/pool"
)

// This file is the ONLY place that wires the concrete isolation,
// environment and tool-RPC packages into the pool. Everything else in
// cmd/kernpool sees them through the seams struct.

// seams are the pool.Config fields the concrete packages fill, plus what
// the daemon reports about them.
type seams struct {
	// Sandboxes confines kernels (isolate.Isolator).
	Sandboxes pool.SandboxFactory
	// Env builds kernel environments (envscrub.Scrubber).
	Env pool.EnvBuilder
	// Output cleans kernel output (envscrub.Pipeline).
	Output pool.OutputFilterFactory
	// Tools opens tool-RPC listeners (rpcsock).
	Tools pool.ToolServerFactory
	// Isolation describes the confinement for /v1/health and doctor.
	Isolation string
	// Close releases what the seams hold (cgroup parent, ...), after the
	// pool closed. Never nil; idempotent.
	Close func() error
}

// buildSeams builds the concrete seams from the config.
//
// TODO(coordinator): wire
//   - isolate.New(isolate.Config{CgroupParent: cfg.Cgroup.Parent, CgroupEnabled: cfg.Cgroup.Enabled,
//     Profiles: <cfg.Profiles as isolate.Profile with specs.LinuxResources>, Ceiling: cfg.Ceiling,
//     UIDRange: cfg.Users.UIDFirst..UIDLast, PerOwnerUID: cfg.Users.PerOwner,
//     RunAsUser: cfg.Users.Enabled && root, StateDir: cfg.StateDir, Logger: log})
//     => Sandboxes (+ Close, + Isolation from its detected mode);
//   - envscrub.New(envscrub.Config{Passthrough: cfg.Env.Passthrough, ModePassthrough: <profile passthrough>,
//     Refuse: cfg.Env.Refuse, Logger: log}) => Env;
//     envscrub.NewPipeline(envscrub.OutputConfig{RedactPatterns: cfg.Output.RedactPatterns, InlineCap: ...}) => Output;
//   - rpcsock => Tools.
//
// and assert at compile time that the concrete types satisfy the seams.
func buildSeams(cfg *Config, log hclog.Logger) (seams, error) {
	_ = cfg
	_ = log
	return seams{Isolation: "process-group", Close: func() error { return nil }}, nil
}

// doctorReport describes the configuration and what the host offers.
func doctorReport(cfg *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernpool %s (%s/%s, %s)\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "uid:          %d (gid %d)\n", os.Getuid(), os.Getgid())
	fmt.Fprintf(&b, "socket:       %s\n", cfg.Socket)
	fmt.Fprintf(&b, "state dir:    %s\n", cfg.StateDir)
	interp := cfg.Interpreter
	if interp == "" {
		interp = "(python3 on PATH, resolved at start)"
	}
	fmt.Fprintf(&b, "interpreter:  %s\n", interp)
	fmt.Fprintf(&b, "timeouts:     idle %s, cell %s (max %s), tool call %s, drain %s\n",
		cfg.IdleTimeout, cfg.CellTimeout, cfg.MaxCellTimeout, cfg.ToolCallTimeout, cfg.DrainGrace)
	fmt.Fprintf(&b, "kernels:      max %d, tool calls per cell %d\n", cfg.MaxKernels, cfg.MaxToolCalls)
	fmt.Fprintf(&b, "cgroup:       parent %q, enabled %t\n", cfg.Cgroup.Parent, cfg.Cgroup.Enabled)
	fmt.Fprintf(&b, "users:        enabled %t, uids %d-%d, per owner %t\n",
		cfg.Users.Enabled, cfg.Users.UIDFirst, cfg.Users.UIDLast, cfg.Users.PerOwner)
	for _, name := range sortedProfileNames(cfg) {
		p := cfg.Profiles[name]
		fmt.Fprintf(&b, "profile %-6q memory %s, swap %s, pids %d, cpu %g, weight %d, network %t\n",
			name, formatLimit(p.MemoryMax), formatSwap(p.MemorySwapMax), p.PidsMax, p.CPUMax, p.CPUWeight, p.Network)
	}
	fmt.Fprintf(&b, "isolation:    not wired yet (cgroup, uid and namespace checks come with isolate)\n")
	return b.String()
}
