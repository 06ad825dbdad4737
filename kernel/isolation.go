package kernel

import (
	"fmt"
	"strings"

	"github.com/kernpool/kernpool/units"
)

// IsolationMode is the isolation a daemon promises its kernels. It is the
// one definition of the modes: the daemon's config and flag, package
// isolate and every result's kernel.isolation block use it.
type IsolationMode string

// Isolation modes. docs/config.md ("isolation") describes what each allows.
const (
	// IsolationSandbox is the default: every kernel gets everything the
	// configuration asks for (a uid of its own, its cgroup limits, the
	// namespaces and the seccomp filter of the init step), and the daemon
	// refuses to start when any of it cannot be applied on this host.
	IsolationSandbox IsolationMode = "sandbox"
	// IsolationProcess is the explicit degraded mode: kernels get what the
	// host offers, at least a process group of their own, and may run as
	// the daemon's own uid. Then they can read each other's files and the
	// daemon's, and signal each other and the daemon.
	IsolationProcess IsolationMode = "process"
)

// IsolationModes lists the valid modes, the default first.
func IsolationModes() []IsolationMode {
	return []IsolationMode{IsolationSandbox, IsolationProcess}
}

// ParseIsolationMode accepts one of IsolationModes ("" is the default).
func ParseIsolationMode(s string) (IsolationMode, error) {
	if s == "" {
		return IsolationSandbox, nil
	}
	names := make([]string, 0, 2)
	for _, m := range IsolationModes() {
		if string(m) == s {
			return m, nil
		}
		names = append(names, string(m))
	}
	return "", fmt.Errorf("isolation %q is not one of %s", s, strings.Join(names, ", "))
}

// Isolation is what was really enforced for one kernel; every result and
// every kernel listing carries it (docs/api.md, "kernel.isolation").
type Isolation struct {
	// Mode is the daemon's isolation mode.
	Mode IsolationMode `json:"mode"`
	// UID is the uid the kernel runs as (-1 where the platform has none).
	UID int `json:"uid"`
	// Namespaces are the Linux namespaces the kernel has of its own
	// as /proc/self/ns names them ("mnt", "ipc",
	// "uts", "net", "pid"); empty when it shares all of the host's.
	Namespaces []string `json:"namespaces"`
	// Seccomp: a seccomp filter refuses the dangerous syscalls.
	Seccomp bool `json:"seccomp"`
	// MemoryMax is the memory limit in bytes as the kernel's cgroup has
	// it (0: none).
	MemoryMax int64 `json:"memory_max"`
	// PidsMax is the task limit as the kernel's cgroup has it (0: none).
	PidsMax int64 `json:"pids_max"`
	// CPUMax is the CPU quota in cores as the kernel's cgroup has it (0: none).
	CPUMax float64 `json:"cpu_max"`
	// Network: the kernel reaches the host's network (false: only its own
	// loopback).
	Network bool `json:"network"`
	// MemoryMerge: the kernel's pages are open to the host's samepage
	// merging with other merging kernels, its address layout and hash seed
	// are those of every merging kernel (docs/design.md, "Sharing idle
	// kernels' pages"); false for every profile unless configured.
	MemoryMerge bool `json:"memory_merge"`
	// Supervisor is what the kernel's init reported supervises its
	// interpreter as the pid namespace's init: "reaper" (the init exec'd
	// into a few hundred bytes of machine code) or "go" (its Go fallback,
	// about 1 MiB more per kernel); empty without the init step.
	Supervisor string `json:"supervisor,omitempty"`
}

// Summary renders the isolation on one line, for `kernpool ps` and logs:
// "sandbox uid=60001 mem=512MiB pids=256 cpu=1 ns=net,pid seccomp=off net=on",
// " merge=on" for a kernel open to samepage merging and " init=reaper" (or
// "go") for a kernel whose init reported its supervisor.
func (i Isolation) Summary() string {
	ns := strings.Join(i.Namespaces, ",")
	if ns == "" {
		ns = "none"
	}
	cpu := "unlimited"
	if i.CPUMax > 0 {
		cpu = fmt.Sprintf("%g", i.CPUMax)
	}
	pids := "unlimited"
	if i.PidsMax > 0 {
		pids = fmt.Sprint(i.PidsMax)
	}
	s := fmt.Sprintf("%s uid=%d mem=%s pids=%s cpu=%s ns=%s seccomp=%s net=%s",
		i.Mode, i.UID, units.FormatBytes(i.MemoryMax), pids, cpu, ns, onOff(i.Seccomp), onOff(i.Network))
	if i.MemoryMerge {
		s += " merge=on"
	}
	if i.Supervisor != "" {
		s += " init=" + i.Supervisor
	}
	return s
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
