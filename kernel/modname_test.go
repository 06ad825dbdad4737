package kernel

import (
	"strings"
	"testing"
)

// ValidModuleName against names written out by hand: the length limit,
// digits at the ends of their range leading a part, and each end of the
// identifier ranges after a first letter, with its outside neighbour.
func TestValidModuleNameEdges(t *testing.T) {
	long := strings.Repeat("a", 256)
	cases := []struct {
		name string
		ok   bool
	}{
		{"email.mime.text", true},
		{"_private", true},
		{"A_Z.a9", true},
		{"az09AZ.z0", true},
		{long, true},
		{long + "a", false},
		{"", false},
		{"0x", false},
		{"9x", false},
		{"a.0b", false},
		{"a-b", false},
		{"a/", false},
		{"a:", false},
		{"a@", false},
		{"a[", false},
		{"a`", false},
		{"a{", false},
		{"a..b", false},
		{".a", false},
		{"a.", false},
		{"é", false},
	}
	for _, c := range cases {
		if got := ValidModuleName(c.name); got != c.ok {
			t.Errorf("ValidModuleName(%.20q) = %v, want %v", c.name, got, c.ok)
		}
	}
}

// Isolation.Summary against the line its doc shows, and with no limits.
func TestIsolationSummary(t *testing.T) {
	full := Isolation{Mode: "sandbox", UID: 60001, MemoryMax: 512 << 20, PidsMax: 256, CPUMax: 1,
		Namespaces: []string{"net", "pid"}, Network: true}
	if got, want := full.Summary(), "sandbox uid=60001 mem=512MiB pids=256 cpu=1 ns=net,pid seccomp=off net=on"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	merged := Isolation{Mode: "sandbox", UID: 60001, MemoryMax: 512 << 20, PidsMax: 1, CPUMax: 0.5, Seccomp: true, MemoryMerge: true}
	if got, want := merged.Summary(), "sandbox uid=60001 mem=512MiB pids=1 cpu=0.5 ns=none seccomp=on net=off merge=on"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	if got := (Isolation{Mode: "process-group", UID: -1}).Summary(); !strings.Contains(got, " pids=unlimited cpu=unlimited ns=none ") {
		t.Errorf("Summary() without limits = %q, want pids and cpu unlimited", got)
	}
}

// ParseIsolationMode: "" is sandbox, each mode parses to itself, anything
// else is refused naming the modes.
func TestParseIsolationMode(t *testing.T) {
	for in, want := range map[string]IsolationMode{"": "sandbox", "sandbox": "sandbox", "process": "process"} {
		if got, err := ParseIsolationMode(in); err != nil || got != want {
			t.Errorf("ParseIsolationMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := ParseIsolationMode("Sandbox"); err == nil || !strings.Contains(err.Error(), "not one of sandbox, process") {
		t.Errorf("ParseIsolationMode(Sandbox) = %q, %v; want refused", got, err)
	}
}
