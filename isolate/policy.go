package isolate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kernpool/kernpool/kernel"
)

// initFacts is what the kernel init step (package kinit) gives every
// kernel on this host. It is THE one place the init step's host probe
// plugs in: probeInit (ProbeInit under Config.InitStep) fills it, and
// everything else (the fail-closed check in New, each kernel's
// Isolation(), the doctor report) reads it. A failed probe is a Lost
// protection, which sandbox mode refuses and process mode reports; then,
// and without InitStep, kernels get only the namespaces their profile asks
// for through SysProcAttr (net, pid) and no seccomp filter. Once a kernel
// started, its Isolation() reports what its own init saw.
type initFacts struct {
	// Probed: an init step exists and was probed on this host.
	Probed bool
	// Works: the probe ran the init step successfully.
	Works bool
	// Why says what failed when Probed && !Works, and how to fix it.
	Why string
	// Namespaces every kernel gets from the init step, as /proc/self/ns
	// names them ("mnt", "ipc", "uts", "pid"); "net" follows the profile.
	Namespaces []string
	// Seccomp: the init step installs the seccomp filter.
	Seccomp bool
	// Path is the binary run as each kernel's init (ResolveInitPath).
	Path string
}

// hostNetwork says whether kernels of profile p share the host's network:
// under a working init step unless p.Network opts in, else unless
// p.NoNetwork asks for a namespace.
func (f initFacts) hostNetwork(p Profile) bool {
	if f.Works {
		return p.Network
	}
	return !p.NoNetwork
}

// namespacesFor lists the namespaces a kernel of profile p gets: the init
// step's, plus the ones p asks for, sorted and without duplicates.
func (f initFacts) namespacesFor(p Profile) []string {
	set := map[string]bool{}
	for _, n := range f.Namespaces {
		set[n] = true
	}
	if !f.hostNetwork(p) {
		set["net"] = true
	}
	if p.PIDNamespace && !f.Works {
		set["pid"] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// isolationMode is the configured mode ("" is the default, sandbox).
func (c *Config) isolationMode() kernel.IsolationMode {
	if c.Isolation == "" {
		return kernel.IsolationSandbox
	}
	return c.Isolation
}

// enforce is the fail-closed rule: in sandbox mode, anything the host
// cannot give kernels refuses the start, naming each missing protection
// and its fix; process mode accepts what there is.
func (r Report) enforce() error {
	if r.Isolation == kernel.IsolationProcess || len(r.Lost) == 0 {
		return nil
	}
	why := ""
	if r.CgroupReason != "" {
		why = " (cgroups: " + r.CgroupReason + ")"
	}
	return fmt.Errorf("%w: kernels would lack %s%s. To fix: %s; or accept this explicitly with --isolation=process (config: isolation = \"process\")",
		ErrIsolation, strings.Join(r.Lost, "; "), why, strings.Join(r.Advice, "; "))
}

// Allows says in plain words what kernels can do to each other and to the
// daemon in process mode ("" in sandbox mode, which allows none of it).
func (r Report) Allows() string {
	if r.Isolation != kernel.IsolationProcess {
		return ""
	}
	var parts []string
	if !r.RunAsUser {
		parts = append(parts, fmt.Sprintf("kernels run as the daemon's own uid %d: they can read and change each other's files and the daemon's, "+
			"signal and kill each other and the daemon, and connect to the daemon's API socket to run code in any owner's kernel "+
			"(the daemon is non-dumpable, so they cannot read its memory or environment through /proc)", r.DaemonUID))
	}
	if len(r.Lost) > 0 {
		parts = append(parts, "kernels lack "+strings.Join(r.Lost, "; "))
	}
	if len(parts) == 0 {
		return "nothing beyond sandbox mode on this host"
	}
	return strings.Join(parts, ". ")
}

func sortStrings(s []string) { sort.Strings(s) }

// profileReports is what a kernel of each configured mode gets, for the
// report: limits as configured, namespaces and seccomp from facts.
func profileReports(cfg Config, facts initFacts, uid int) map[string]kernel.Isolation {
	out := make(map[string]kernel.Isolation, len(cfg.Profiles))
	for name, p := range cfg.Profiles {
		l := profileLimits(p.Resources)
		out[name] = kernel.Isolation{
			Mode: cfg.isolationMode(), UID: uid, Namespaces: facts.namespacesFor(p), Seccomp: facts.Seccomp,
			MemoryMax: l.MemoryMax, PidsMax: l.PidsMax, CPUMax: l.CPUMax, Network: facts.hostNetwork(p),
			MemoryMerge: p.MemoryMerge && facts.Works,
		}
	}
	return out
}
