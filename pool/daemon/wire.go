package daemon

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// This file is the ONLY place that wires the concrete isolation,
// environment and tool-RPC packages into the pool. Each of them imports
// pool and fills its seams with pool's own types (and asserts so itself),
// so wiring is plain assignment. Everything else in pool/daemon (and
// cmd/kernpool above it) sees them through the seams struct.

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
	// Check refuses an interpreter or cwd a kernel's uid cannot use.
	Check func(interpreter, cwd string) error
	// Close releases what the seams hold (cgroup parent, ...), after the
	// pool closed. Never nil; idempotent.
	Close func() error
	// SetLimits applies a reloaded config's profile limits and ceiling to
	// kernels started from now on (SIGHUP). Never nil.
	SetLimits func(cfg *Config) error
}

// buildSeams builds the concrete seams from the config: isolate for
// sandboxes (cgroup, uid, namespaces, or the process-group fallback),
// envscrub for the child environment and the output pipeline, rpcsock for
// tool calls. The isolator sweeps what a dead daemon left, so serve calls
// this only after it holds the state-dir lock.
func buildSeams(cfg *Config, log hclog.Logger) (seams, error) {
	iso, err := isolate.New(isolateConfig(cfg, log))
	if err != nil {
		return seams{}, err
	}
	rep := iso.Report()
	if a := rep.Allows(); a != "" {
		// The explicit degraded mode says, once, what it lets kernels do.
		// (isolate.New itself logs the "reduced kernel isolation" warning.)
		log.Warn("isolation=process: kernels are NOT sandboxed", "allows", a)
	}
	scrub, err := envscrub.New(envscrub.Config{
		Passthrough:     cfg.Env.Passthrough,
		ModePassthrough: profilePassthrough(cfg),
		Refuse:          cfg.Env.Refuse,
		Logger:          log,
	})
	if err != nil {
		_ = iso.Close()
		return seams{}, err
	}
	pipe := envscrub.NewPipeline(envscrub.OutputConfig{
		DisablePatternRedaction: !cfg.Output.RedactPatterns,
		InlineCap:               cfg.Output.InlineCap,
		StderrCap:               cfg.Output.StderrCap,
		SpillCap:                cfg.Output.SpillCap,
		SpillQuota:              cfg.Output.SpillQuota,
	})
	return seams{
		Sandboxes: iso,
		Env:       scrub,
		Output:    pipe,
		Tools:     rpcsock.Factory{Logger: log},
		Isolation: isolationSummary(rep),
		Check:     iso.CheckAccess,
		Close:     iso.Close,
		SetLimits: func(c *Config) error {
			ic := isolateConfig(c, log)
			return iso.SetLimits(ic.Profiles, ic.Ceiling)
		},
	}, nil
}

// isolateConfig maps the daemon config onto isolate's.
func isolateConfig(cfg *Config, log hclog.Logger) isolate.Config {
	ic := isolate.DefaultConfig(cfg.StateDir)
	ic.Isolation = cfg.Isolation
	ic.OwnerLock = stateLockName
	ic.CgroupParent = cfg.Cgroup.Parent
	ic.CgroupEnabled = cfg.Cgroup.Enabled
	ic.UIDRange = [2]int{cfg.Users.UIDFirst, cfg.Users.UIDLast}
	ic.PerOwnerUID = cfg.Users.PerOwner
	// Not root: isolate refuses (sandbox) or says what is lost (process).
	ic.RunAsUser = cfg.Users.Enabled
	ic.Ceiling = isolate.Limits{MemoryMax: cfg.Ceiling.MemoryMax, PidsMax: cfg.Ceiling.PidsMax, CPUMax: cfg.Ceiling.CPUMax}
	ic.Profiles = make(map[string]isolate.Profile, len(cfg.Profiles))
	for name, p := range cfg.Profiles {
		ic.Profiles[name] = isolate.Profile{
			Resources:    profileResources(p),
			Network:      p.Network,
			TmpSize:      p.TmpSize,
			PtyMax:       p.PtyMax,
			NoNetwork:    !p.Network,
			PIDNamespace: p.PIDNamespace,
			PrivateTmp:   p.PrivateTmp,
			MemoryMerge:  p.MemoryMerge,
		}
	}
	ic.Logger = log
	return ic
}

// profileResources expresses a profile's limits as runtime-spec resources.
func profileResources(p Profile) *specs.LinuxResources {
	r := isolate.LimitsResources(isolate.Limits{MemoryMax: p.MemoryMax, PidsMax: p.PidsMax, CPUMax: p.CPUMax})
	if p.MemoryMax > 0 && p.MemorySwapMax > 0 {
		if r.Memory == nil {
			r.Memory = &specs.LinuxMemory{}
		}
		total := p.MemoryMax + p.MemorySwapMax // runtime-spec's Swap is memory+swap
		r.Memory.Swap = &total
	}
	if p.CPUWeight > 0 {
		if r.CPU == nil {
			r.CPU = &specs.LinuxCPU{}
		}
		shares := cpuWeightToShares(p.CPUWeight)
		r.CPU.Shares = &shares
	}
	return r
}

// cpuWeightToShares maps a cgroup-v2 weight (1-10000, default 100) to v1
// shares (2-262144, default 1024), the inverse of the kernel's and runc's
// shares-to-weight conversion.
func cpuWeightToShares(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	return 2 + (w-1)*262142/9999
}

func profilePassthrough(cfg *Config) map[string][]string {
	out := make(map[string][]string, len(cfg.Profiles))
	for name, p := range cfg.Profiles {
		if len(p.Passthrough) > 0 {
			out[name] = p.Passthrough
		}
	}
	return out
}

// isolationSummary is the one-line isolation description /v1/health shows.
func isolationSummary(r isolate.Report) string {
	parts := []string{string(r.Isolation)}
	if r.CgroupActive {
		parts = append(parts, "cgroup ("+r.CgroupMode+": "+strings.Join(r.Controllers, ",")+")")
	} else {
		parts = append(parts, "process-group")
	}
	if r.RunAsUser {
		parts = append(parts, fmt.Sprintf("uids %d-%d", r.UIDFirst, r.UIDLast))
	}
	if r.NoNewPrivs {
		parts = append(parts, "no_new_privs")
	}
	return strings.Join(parts, ", ")
}
