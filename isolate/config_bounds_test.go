package isolate

import (
	"math"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// What validate accepts at its bounds: pty_max 256, a one-uid range,
// soft = hard, Windows absolute state dirs.
func TestValidateAcceptsBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
	}{
		{"pty_max 256", func(c *Config) { c.Profiles["x"] = Profile{PtyMax: 256} }},
		{"one uid", func(c *Config) { c.RunAsUser, c.UIDRange = true, [2]int{5, 5} }},
		{"soft = hard", func(c *Config) { c.Rlimits = []Rlimit{{Name: "nofile", Soft: 7, Hard: 7}} }},
		{"drive and backslash", func(c *Config) { c.StateDir = "C:\\kernpool" }},
		{"drive and slash", func(c *Config) { c.StateDir = "C:/kernpool" }},
	} {
		cfg := DefaultConfig("/state")
		c.edit(&cfg)
		if err := cfg.validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// profileLimits reads a profile's cpu quota against its own period, the
// default 100000 µs where none (or 0) is set, and no cpu limit from a
// quota of none.
func TestProfileLimitsCPU(t *testing.T) {
	i64, u64 := func(v int64) *int64 { return &v }, func(v uint64) *uint64 { return &v }
	for _, c := range []struct {
		name string
		cpu  *specs.LinuxCPU
		want float64
	}{
		{"quota and period", &specs.LinuxCPU{Quota: i64(50000), Period: u64(200000)}, 0.25},
		{"no period", &specs.LinuxCPU{Quota: i64(50000)}, 0.5},
		{"period 0", &specs.LinuxCPU{Quota: i64(50000), Period: u64(0)}, 0.5},
		{"quota 0", &specs.LinuxCPU{Quota: i64(0), Period: u64(0)}, 0},
		{"quota -1: none", &specs.LinuxCPU{Quota: i64(-1), Period: u64(100000)}, 0},
	} {
		got := profileLimits(&specs.LinuxResources{CPU: c.cpu}).CPUMax
		if got != c.want || math.IsNaN(got) {
			t.Errorf("%s: cpu_max %v, want %v", c.name, got, c.want)
		}
	}
}

// A profile's memory limit configured without swap gets no swap (swap =
// memory) in what resolve hands the kernel; a configured swap stays.
func TestResolveMemoryWithoutSwap(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name      string
		mem       *specs.LinuxMemory
		wantLimit int64
		wantSwap  int64
	}{
		{"limit, no swap", &specs.LinuxMemory{Limit: i64(256 << 20)}, 256 << 20, 256 << 20},
		{"limit and swap", &specs.LinuxMemory{Limit: i64(256 << 20), Swap: i64(512 << 20)}, 256 << 20, 512 << 20},
	} {
		cfg := DefaultConfig("/state")
		cfg.Profiles["p"] = Profile{Resources: &specs.LinuxResources{Memory: c.mem}}
		r, _, err := cfg.resolve("p", Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Memory == nil || r.Memory.Limit == nil || r.Memory.Swap == nil || *r.Memory.Limit != c.wantLimit || *r.Memory.Swap != c.wantSwap {
			t.Errorf("%s: memory %+v, want limit %d swap %d", c.name, r.Memory, c.wantLimit, c.wantSwap)
		}
	}
	cfg := DefaultConfig("/state")
	cfg.Profiles["none"] = Profile{Resources: &specs.LinuxResources{}}
	if r, _, err := cfg.resolve("none", Limits{}); err != nil || r.Memory != nil {
		t.Errorf("a profile without memory: %+v, %v; want no memory settings", r, err)
	}
}

// Where neither a ceiling nor the profile bounds a field, any request is
// taken.
func TestResolveUnboundedField(t *testing.T) {
	cfg := DefaultConfig("/state")
	cfg.Profiles["nopids"] = Profile{Resources: LimitsResources(Limits{MemoryMax: 1 << 30})}
	r, _, err := cfg.resolve("nopids", Limits{PidsMax: 100000})
	if err != nil || r.Pids == nil || *r.Pids.Limit != 100000 {
		t.Errorf("pids_max 100000 with no ceiling and no profile pids: %+v, %v; want taken", r.Pids, err)
	}
}

// Modes of a config without profiles is the default alone.
func TestModesWithoutProfiles(t *testing.T) {
	if got := (&Config{}).Modes(); !slices.Equal(got, []string{"default"}) {
		t.Errorf("Modes() = %q, want [default]", got)
	}
}
