package isolate

import (
	"errors"
	"testing"
)

// TestOverCeilingMessages: a limit over the ceiling (or over the
// profile's value when no ceiling is set) is refused with a message an
// operator reads: sizes as they are written in the config and exact
// bytes, never a float in scientific notation.
func TestOverCeilingMessages(t *testing.T) {
	cfg := DefaultConfig("/state")
	cfg.Profiles["small"] = Profile{Resources: LimitsResources(Limits{MemoryMax: 512 << 20, PidsMax: 64, CPUMax: 0.5})}
	cfg.Ceiling = Limits{MemoryMax: 4 << 30, CPUMax: 2}
	bare := cfg
	bare.Ceiling = Limits{}
	cases := []struct {
		name string
		cfg  Config
		lim  Limits
		want string
	}{
		{"memory over the ceiling", cfg, Limits{MemoryMax: 8 << 30},
			"memory_max 8GiB (8589934592 bytes): limit over the operator ceiling: at most 4GiB (4294967296 bytes), the ceiling"},
		{"memory no binary unit divides", cfg, Limits{MemoryMax: 5_000_000_001},
			"memory_max 5000000001 bytes: limit over the operator ceiling: at most 4GiB (4294967296 bytes), the ceiling"},
		{"memory over the profile without a ceiling", bare, Limits{MemoryMax: 1 << 30},
			"memory_max 1GiB (1073741824 bytes): limit over the operator ceiling: at most 512MiB (536870912 bytes), the profile's value (no ceiling is set)"},
		{"pids over the profile without a ceiling", cfg, Limits{PidsMax: 65},
			"pids_max 65: limit over the operator ceiling: at most 64, the profile's value (no ceiling is set)"},
		{"cpu over the ceiling", cfg, Limits{CPUMax: 2.5},
			"cpu_max 2.5: limit over the operator ceiling: at most 2, the ceiling"},
	}
	for _, c := range cases {
		_, _, err := c.cfg.resolve("small", c.lim)
		if !errors.Is(err, ErrOverCeiling) || err.Error() != c.want {
			t.Errorf("%s:\n got  %v\n want %s", c.name, err, c.want)
		}
	}
	if _, _, err := cfg.resolve("small", Limits{MemoryMax: 4 << 30}); err != nil {
		t.Errorf("memory at the ceiling: %v", err)
	}
}
