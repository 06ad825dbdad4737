package isolate

import (
	"fmt"
	"strings"

	"github.com/kernpool/kernpool/kernel"
)

// Report says what isolation kernels get on this host and what is missing:
// `kernpool doctor` prints String(), the daemon logs Warning() once at start.
type Report struct {
	// Isolation is the daemon's isolation mode.
	Isolation kernel.IsolationMode
	// DaemonUID is the daemon's own uid.
	DaemonUID int
	// Platform is GOOS.
	Platform string
	// CgroupMode is the host's cgroup layout ("hybrid (...)", "none").
	CgroupMode string
	// CgroupActive: every kernel gets its own cgroup.
	CgroupActive bool
	// CgroupReason says why cgroups are not used ("" when active).
	CgroupReason string
	// Controllers the pool uses (memory, pids, cpu, ...).
	Controllers []string
	// Parents are the pool parent groups.
	Parents []string
	// Delegated: the daemon's own v2 group is delegated to it.
	Delegated bool
	// DaemonLeaf is the leaf group the daemon moved into ("" if none).
	DaemonLeaf string
	// Placement and Kill say how a kernel enters its group and how its tree dies.
	Placement, Kill string
	// RunAsUser: kernels run as uids from UIDFirst-UIDLast.
	RunAsUser         bool
	UIDFirst, UIDLast int
	// PerOwnerUID: one stable uid per owner instead of per kernel.
	PerOwnerUID bool
	// TaintedUIDs counts range uids skipped because processes used them at start.
	TaintedUIDs int
	// NoNewPrivs and Rlimits are applied by the runner before user code.
	NoNewPrivs bool
	Rlimits    string
	// Namespaces lists the namespaces kernels get (e.g. "net (profile x)").
	Namespaces []string
	// Seccomp: kernels run under the init step's seccomp filter.
	Seccomp bool
	// InitStep: kernels start through the kernel init step (kinit), which
	// ProbeInit showed working on this host.
	InitStep bool
	// InitPath is the binary run as each kernel's init.
	InitPath string
	// Supervisor says what supervises each kernel's interpreter once it
	// runs (InitStep): the reaper, or the init's Go fallback and why.
	Supervisor string
	// PrivatePaths and ReadOnlyPaths are the host dirs kernel uids could
	// write, found at start: a private tmpfs, or read-only, in every kernel.
	PrivatePaths, ReadOnlyPaths []string
	// Profiles is what a kernel of each mode gets (uid -1: one from the
	// range, or the daemon's; limits as configured, before per-request
	// overrides), by mode name.
	Profiles map[string]kernel.Isolation
	// MemoryMerge names the profiles whose kernels share pages through
	// samepage merging and whether the host's ksmd runs ("": none).
	MemoryMerge string
	// Swept counts leftover kernel groups of a dead instance removed at start.
	Swept int
	// Lost lists the protections kernels do not get here.
	Lost []string
	// Advice says what to change to get them.
	Advice []string
}

// Report says what isolation kernels get here.
func (i *Isolator) Report() Report {
	r := i.report
	r.Lost = append([]string(nil), r.Lost...)
	r.Advice = append([]string(nil), r.Advice...)
	r.Profiles = make(map[string]kernel.Isolation, len(i.report.Profiles))
	for k, v := range i.report.Profiles {
		v.Namespaces = append([]string{}, v.Namespaces...)
		r.Profiles[k] = v
	}
	return r
}

// String renders the report for `kernpool doctor`.
func (r Report) String() string {
	var b strings.Builder
	w := func(k, v string) { fmt.Fprintf(&b, "%-18s %s\n", k+":", v) }
	w("isolation", string(r.Isolation))
	w("platform", r.Platform)
	w("cgroup mode", orNone(r.CgroupMode))
	if r.CgroupActive {
		w("cgroups", "one group per kernel")
		w("controllers", orNone(strings.Join(r.Controllers, " ")))
		w("pool parent", strings.Join(r.Parents, " "))
		w("delegation", delegation(r))
		w("placement", r.Placement)
		w("tree kill", r.Kill)
	} else {
		w("cgroups", "not used: "+r.CgroupReason)
		w("tree kill", "process group (killpg)"+uidKill(r))
	}
	if r.RunAsUser {
		mode := "one uid/gid per live kernel"
		if r.PerOwnerUID {
			mode = "one stable uid/gid per owner"
		}
		w("kernel uids", fmt.Sprintf("%d-%d, %s, no supplementary groups (%d skipped: in use)", r.UIDFirst, r.UIDLast, mode, r.TaintedUIDs))
	} else {
		w("kernel uids", "the daemon's own uid")
	}
	w("process", "own process group, SIGKILL on daemon death (Pdeathsig + stdin EOF)")
	w("no_new_privs", fmt.Sprint(r.NoNewPrivs))
	w("rlimits", orNone(r.Rlimits))
	w("namespaces", orNone(strings.Join(r.Namespaces, ", ")))
	if r.InitStep {
		w("init step", r.InitPath+": private /tmp, /var/tmp, /dev/shm, staging dir; own /proc, devpts, mqueue, cgroup namespace; umask 077; orphans reaped")
		w("supervisor", r.Supervisor)
		if len(r.PrivatePaths)+len(r.ReadOnlyPaths) > 0 {
			w("host paths", "private: "+strings.Join(r.PrivatePaths, " ")+"; read-only: "+strings.Join(r.ReadOnlyPaths, " "))
		}
	} else {
		w("init step", "off: kernels share /tmp, /dev/shm, SysV IPC, the network and /proc with the host")
	}
	if r.Swept > 0 {
		w("crash recovery", fmt.Sprintf("swept %d leftover kernel group(s)", r.Swept))
	}
	w("seccomp", fmt.Sprint(r.Seccomp))
	if r.MemoryMerge != "" {
		w("memory merge", r.MemoryMerge)
	}
	for _, name := range sortedKeys(r.Profiles) {
		w("mode "+name, r.Profiles[name].Summary())
	}
	if a := r.Allows(); a != "" {
		w("process mode", a)
	}
	if len(r.Lost) > 0 {
		w("missing", strings.Join(r.Lost, "; "))
		w("to get more", strings.Join(r.Advice, "; "))
	} else {
		w("missing", "nothing")
	}
	return b.String()
}

// Warning is the one start-up warning ("" when nothing is lost).
func (r Report) Warning() string {
	if len(r.Lost) == 0 {
		return ""
	}
	msg := "reduced kernel isolation: kernels lose " + strings.Join(r.Lost, "; ")
	if r.CgroupReason != "" {
		msg += " (cgroups: " + r.CgroupReason + ")"
	}
	if len(r.Advice) > 0 {
		msg += ". To get more: " + strings.Join(r.Advice, "; ")
	}
	return msg
}

func sortedKeys(m map[string]kernel.Isolation) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func delegation(r Report) string {
	switch {
	case r.Delegated && r.DaemonLeaf != "":
		return "delegated; daemon moved into " + r.DaemonLeaf
	case r.Delegated:
		return "delegated"
	case r.DaemonLeaf != "":
		return "daemon moved into " + r.DaemonLeaf
	default:
		return "not delegated (pool parent created from the hierarchy root)"
	}
}

func uidKill(r Report) string {
	if r.RunAsUser && !r.PerOwnerUID {
		return " + every process of the kernel's own uid"
	}
	return ""
}

// cgroupLosses is what a kernel lacks without its own cgroup.
func cgroupLosses(runAs, perOwner bool) []string {
	lost := []string{"memory, pids and cpu limits", "OOM-kill reporting", "per-kernel stats"}
	if !runAs || perOwner {
		lost = append(lost, "killing descendants that leave the process group (setsid, double fork)")
	}
	return lost
}
