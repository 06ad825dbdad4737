package kinit

import (
	"fmt"
	"strconv"
	"strings"
)

// Status lines on the status pipe, one per line:
//
//	ready <pid> ns=<mnt,pid,...> seccomp=<0|1> [merge=1] [init=<reaper|go>]
//	                                            setup done, interpreter forked
//	fail <message>                              setup failed, nothing forked
//	exit <code> | signal <number>               the interpreter ended
//
// The daemon reads the first line before Start returns (fail closed) and
// the last after the init was reaped.

// Supervisors a Ready line names (init=...).
const (
	SupervisorReaper = "reaper" // the init exec'd into the reaper
	SupervisorGo     = "go"     // the init's own Go supervise loop
)

// Ready is what the init reports once the interpreter runs.
type Ready struct {
	// Pid is the interpreter's pid inside the kernel's pid namespace.
	Pid int
	// Namespaces are those the init runs in (mnt, pid, ipc, uts, net).
	Namespaces []string
	// Seccomp: the filter is loaded.
	Seccomp bool
	// MemoryMerge: the kernel's pages are open to samepage merging
	// (PR_GET_MEMORY_MERGE said so after the init asked for it).
	MemoryMerge bool
	// Supervisor is what supervises the interpreter: SupervisorReaper
	// (the init exec'd into the reaper), SupervisorGo, or "" (a probe, or
	// an init from before the field).
	Supervisor string
}

func (r Ready) line() string {
	s := "0"
	if r.Seccomp {
		s = "1"
	}
	extra := ""
	if r.MemoryMerge {
		extra = " merge=1"
	}
	if r.Supervisor != "" {
		extra += " init=" + r.Supervisor
	}
	return fmt.Sprintf("ready %d ns=%s seccomp=%s%s\n", r.Pid, strings.Join(r.Namespaces, ","), s, extra)
}

// ParseStatus reads the status lines the init wrote. ready is nil unless a
// ready line came; failure is the fail message; exited says whether an
// exit or signal line came, with code (exit) or signal (> 0).
func ParseStatus(text string) (ready *Ready, failure string, exited bool, code, signal int) {
	for _, line := range strings.Split(text, "\n") {
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "ready":
			ready = parseReady(rest)
		case "fail":
			failure = rest
		case "exit", "signal":
			n, err := strconv.Atoi(rest)
			if err != nil {
				continue
			}
			exited = true
			if word == "exit" {
				code, signal = n, 0
			} else {
				code, signal = -1, n
			}
		}
	}
	return ready, failure, exited, code, signal
}

func parseReady(rest string) *Ready {
	r := &Ready{}
	for i, f := range strings.Fields(rest) {
		switch {
		case i == 0:
			r.Pid, _ = strconv.Atoi(f)
		case strings.HasPrefix(f, "ns="):
			if v := strings.TrimPrefix(f, "ns="); v != "" {
				r.Namespaces = strings.Split(v, ",")
			}
		case f == "seccomp=1":
			r.Seccomp = true
		case f == "merge=1":
			r.MemoryMerge = true
		case strings.HasPrefix(f, "init="):
			r.Supervisor = strings.TrimPrefix(f, "init=")
		}
	}
	return r
}
