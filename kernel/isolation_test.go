package kernel

import "testing"

// The isolation mode names the config and flag accept: "" is the default
// (sandbox), anything else but the two names is refused, naming both.
func TestParseIsolationModeNames(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{"", "sandbox", ""},
		{"sandbox", "sandbox", ""},
		{"process", "process", ""},
		{"Process", "", `isolation "Process" is not one of sandbox, process`},
		{"none", "", `isolation "none" is not one of sandbox, process`},
	} {
		m, err := ParseIsolationMode(c.in)
		if string(m) != c.want || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("ParseIsolationMode(%q) = %q, %v; want %q, %q", c.in, m, err, c.want, c.err)
		}
	}
}

// Summary, the one line `kernpool ps` and the logs show: limits of 0 are
// "unlimited", a fractional CPU quota keeps its fraction, no namespaces
// is "none", only a merging kernel says merge=on, and init= appears only
// where the kernel's init named its supervisor.
func TestIsolationSummaryLine(t *testing.T) {
	for _, c := range []struct {
		iso  Isolation
		want string
	}{
		{Isolation{Mode: IsolationSandbox, UID: 60001, MemoryMax: 512 << 20, PidsMax: 256, CPUMax: 1, Namespaces: []string{"net", "pid"}, Network: true},
			"sandbox uid=60001 mem=512MiB pids=256 cpu=1 ns=net,pid seccomp=off net=on"},
		{Isolation{Mode: IsolationProcess, UID: -1, Namespaces: []string{}},
			"process uid=-1 mem=unlimited pids=unlimited cpu=unlimited ns=none seccomp=off net=off"},
		{Isolation{Mode: IsolationSandbox, UID: 1000, PidsMax: 1, CPUMax: 0.5, Namespaces: []string{"mnt"}, Seccomp: true, MemoryMerge: true},
			"sandbox uid=1000 mem=unlimited pids=1 cpu=0.5 ns=mnt seccomp=on net=off merge=on"},
		{Isolation{Mode: IsolationSandbox, UID: 1000, Namespaces: []string{"mnt", "pid"}, Seccomp: true, Supervisor: "go"},
			"sandbox uid=1000 mem=unlimited pids=unlimited cpu=unlimited ns=mnt,pid seccomp=on net=off init=go"},
		{Isolation{Mode: IsolationSandbox, UID: 1000, Namespaces: []string{"pid"}, MemoryMerge: true, Supervisor: "reaper"},
			"sandbox uid=1000 mem=unlimited pids=unlimited cpu=unlimited ns=pid seccomp=off net=off merge=on init=reaper"},
	} {
		if got := c.iso.Summary(); got != c.want {
			t.Errorf("Summary() = %q, want %q", got, c.want)
		}
	}
}
