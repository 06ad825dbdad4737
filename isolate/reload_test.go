package isolate

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// bareIsolator has the configuration only: enough for SetLimits and for
// the refusals that come before any uid, cgroup or process.
func bareIsolator(t *testing.T) *Isolator {
	cfg := DefaultConfig(testTempDir(t))
	cfg.Profiles = map[string]Profile{DefaultProfile: {Resources: LimitsResources(Limits{MemoryMax: 1 << 30})}}
	return &Isolator{core: core{cfg: cfg}}
}

// TestSetLimits: a reload that changes only limits takes effect for the
// next kernels (profile and ceiling); one that adds a profile or sets a
// negative limit fails (ErrReload, ErrBadConfig) and changes nothing.
func TestSetLimits(t *testing.T) {
	neg := int64(-1)
	cases := []struct {
		name     string
		profiles map[string]Profile
		want     error
		wantMem  int64 // the default profile's memory limit after the call
	}{
		{"limits only", map[string]Profile{DefaultProfile: {Resources: LimitsResources(Limits{MemoryMax: 2 << 30})}}, nil, 2 << 30},
		{"a new profile", map[string]Profile{
			DefaultProfile: {Resources: LimitsResources(Limits{MemoryMax: 2 << 30})},
			"big":          {Resources: LimitsResources(Limits{MemoryMax: 4 << 30})},
		}, ErrReload, 1 << 30},
		{"a negative limit", map[string]Profile{DefaultProfile: {Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &neg}}}}, ErrBadConfig, 1 << 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iso := bareIsolator(t)
			err := iso.SetLimits(c.profiles, Limits{MemoryMax: 8 << 30})
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("SetLimits: %v, want %v", err, c.want)
			}
			live := iso.resolver()
			if got := profileLimits(live.Profiles[DefaultProfile].Resources).MemoryMax; got != c.wantMem {
				t.Errorf("default profile's memory limit %d after the call, want %d", got, c.wantMem)
			}
			wantCeiling := int64(0)
			if c.want == nil {
				wantCeiling = 8 << 30
			}
			if live.Ceiling.MemoryMax != wantCeiling || len(live.Profiles) != 1 {
				t.Errorf("after the call: ceiling %d (want %d), %d profiles (want 1)", live.Ceiling.MemoryMax, wantCeiling, len(live.Profiles))
			}
		})
	}
}

// TestNewSandboxRefusedMode: the pool's seam returns no sandbox with the
// error for a mode no profile names (a nil *Sandbox in the interface would
// read as a sandbox).
func TestNewSandboxRefusedMode(t *testing.T) {
	sb, err := bareIsolator(t).NewSandbox("k1", "alice", "no-such-profile", Limits{})
	if err == nil || sb != nil {
		t.Fatalf("NewSandbox of an unknown mode: %v, %v; want no sandbox and an error", sb, err)
	}
}
