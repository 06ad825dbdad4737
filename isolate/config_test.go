package isolate

import (
	"errors"
	"strings"
	"testing"
)

func TestResolveLimits(t *testing.T) {
	cfg := DefaultConfig("/state")
	cfg.Profiles["small"] = Profile{Resources: LimitsResources(Limits{MemoryMax: 64 << 20, PidsMax: 64, CPUMax: 0.5})}
	cfg.Ceiling = Limits{MemoryMax: 2 << 30, CPUMax: 2}
	cases := []struct {
		name    string
		mode    string
		lim     Limits
		wantErr error
		field   string
		mem     int64
		pids    int64
		quota   int64
	}{
		{name: "profile of the mode", mode: "small", mem: 64 << 20, pids: 64, quota: 50000},
		{name: "empty mode is default", mode: "", mem: 1 << 30, pids: 512},
		{name: "unknown mode refused with the known ones", mode: "nope", wantErr: ErrUnknownMode, field: "known: default, small"},
		{name: "override within ceiling", mode: "small", lim: Limits{MemoryMax: 1 << 30, CPUMax: 1.5}, mem: 1 << 30, pids: 64, quota: 150000},
		{name: "memory over ceiling", mode: "small", lim: Limits{MemoryMax: 4 << 30}, wantErr: ErrOverCeiling, field: "memory_max"},
		{name: "cpu over ceiling", mode: "small", lim: Limits{CPUMax: 3}, wantErr: ErrOverCeiling, field: "cpu_max"},
		{name: "no pids ceiling: only lower", mode: "small", lim: Limits{PidsMax: 65}, wantErr: ErrOverCeiling, field: "pids_max"},
		{name: "pids lowered", mode: "small", lim: Limits{PidsMax: 16}, mem: 64 << 20, pids: 16, quota: 50000},
		{name: "negative", mode: "small", lim: Limits{MemoryMax: -1}, wantErr: ErrBadLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _, err := cfg.resolve(c.mode, c.lim)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.field) {
					t.Fatalf("err = %v, want %v naming %q", err, c.wantErr, c.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *r.Memory.Limit != c.mem || *r.Memory.Swap != c.mem {
				t.Errorf("memory %d swap %d, want %d (no swap)", *r.Memory.Limit, *r.Memory.Swap, c.mem)
			}
			if *r.Pids.Limit != c.pids {
				t.Errorf("pids %d, want %d", *r.Pids.Limit, c.pids)
			}
			var q int64
			if r.CPU != nil && r.CPU.Quota != nil {
				q = *r.CPU.Quota
			}
			if q != c.quota {
				t.Errorf("cpu quota %d, want %d", q, c.quota)
			}
		})
	}
	// Overrides never write through to the profile.
	if l := profileLimits(cfg.Profiles["small"].Resources); l.MemoryMax != 64<<20 || l.PidsMax != 64 {
		t.Errorf("profile changed by an override: %+v", l)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"relative state dir", func(c *Config) { c.StateDir = "state" }},
		{"empty uid range", func(c *Config) { c.RunAsUser, c.UIDRange = true, [2]int{10, 5} }},
		{"uid 0 in range", func(c *Config) { c.RunAsUser, c.UIDRange = true, [2]int{0, 5} }},
		{"private tmp without the init step", func(c *Config) { c.InitStep, c.Profiles["x"] = false, Profile{PrivateTmp: true} }},
		{"negative tmp size", func(c *Config) { c.Profiles["x"] = Profile{TmpSize: -1} }},
		{"memory merge without the init step", func(c *Config) { c.InitStep, c.Profiles["x"] = false, Profile{MemoryMerge: true} }},
		{"unknown rlimit", func(c *Config) { c.Rlimits = []Rlimit{{Name: "bogus"}} }},
		{"soft over hard", func(c *Config) { c.Rlimits = []Rlimit{{Name: "nofile", Soft: 2, Hard: 1}} }},
		{"pty_max one past 256", func(c *Config) { c.Profiles["x"] = Profile{PtyMax: 257} }},
		{"negative pty_max", func(c *Config) { c.Profiles["x"] = Profile{PtyMax: -1} }},
		{"a drive letter alone", func(c *Config) { c.StateDir = "C:" }},
		{"drive-relative", func(c *Config) { c.StateDir = "C:state" }},
		{"no drive letter", func(c *Config) { c.StateDir = "CC\\state" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig("/state")
			c.edit(&cfg)
			if err := cfg.validate(); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("validate = %v, want ErrBadConfig", err)
			}
		})
	}
}

func TestRlimitEnv(t *testing.T) {
	if got := rlimitEnv(DefaultConfig("/s").Rlimits); got != "core=0:0,nofile=1024:1024" {
		t.Fatalf("rlimitEnv = %q", got)
	}
}

func TestReportWarning(t *testing.T) {
	r := Report{Platform: "linux", CgroupMode: "none", CgroupReason: "no cgroupfs", Lost: cgroupLosses(false, false), Advice: []string{"mount cgroupfs"}}
	w := r.Warning()
	for _, want := range []string{"memory, pids and cpu limits", "OOM-kill reporting", "setsid", "no cgroupfs", "mount cgroupfs"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	if (Report{}).Warning() != "" {
		t.Error("warning with nothing lost")
	}
	s := r.String()
	for _, want := range []string{"cgroup mode:", "kernel uids:", "missing:", "to get more:"} {
		if !strings.Contains(s, want) {
			t.Errorf("doctor text lacks %q:\n%s", want, s)
		}
	}
}

// TestUIDLockDir: the uid lock dir is the configured one, else the
// documented default.
func TestUIDLockDir(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"", "/run/kernpool/uids"},
		{"/srv/kernpool/uids", "/srv/kernpool/uids"},
	} {
		cfg := Config{UIDLockDir: c.set}
		if got := cfg.uidLockDir(); got != c.want {
			t.Errorf("UIDLockDir %q: lock dir %q, want %q", c.set, got, c.want)
		}
	}
}
