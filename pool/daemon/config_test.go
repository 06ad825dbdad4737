package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
)

func TestExampleConfigIsValid(t *testing.T) {
	cfg, err := LoadConfigFile("../../docs/kernpool.example.hcl")
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	def := DefaultConfig()
	// The example spells out the defaults, plus one extra profile.
	if got, want := cfg.Profiles[DefaultProfile], def.Profiles[DefaultProfile]; !reflect.DeepEqual(got, want) {
		t.Errorf("example default profile %+v, built-in %+v", got, want)
	}
	u, ok := cfg.Profiles["untrusted"]
	if !ok || u.MemoryMax != 128<<20 || u.PidsMax != 32 || u.Network || u.TmpSize != 16<<20 || u.PtyMax != 4 {
		t.Errorf("untrusted profile = %+v", u)
	}
	cfg.Profiles, def.Profiles = nil, nil
	if !reflect.DeepEqual(cfg, def) {
		t.Errorf("example config differs from the defaults:\n got %+v\nwant %+v", cfg, def)
	}
}

// configCase is one config file and what ParseConfig makes of it.
type configCase struct {
	name  string
	src   string
	check func(t *testing.T, c *Config)
	err   []string // substrings of the error; nil means success
}

// runConfigCases parses each case's source and checks the config, or that
// the error names every substring.
func runConfigCases(t *testing.T, tests []configCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.src), "test.hcl")
			if tt.err == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tt.check(t, cfg)
				return
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", tt.err)
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []configCase{
		{name: "empty file keeps defaults", src: ``, check: func(t *testing.T, c *Config) {
			if !reflect.DeepEqual(c, DefaultConfig()) {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "good file", src: `
socket = "/tmp/x.sock"
idle_timeout = "90s"
cell_timeout = 20
max_kernels = 8
output { inline_cap = "1KiB" }
users { uid_range = "70000-70010" }
profile "default" { memory_max = "64MiB" }
profile "gpu" {
  memory_max = 1073741824
  cpu_max = 2
}
ceiling { memory_max = "8GiB" }
`, check: func(t *testing.T, c *Config) {
			if c.Socket != "/tmp/x.sock" || c.IdleTimeout != 90*time.Second || c.CellTimeout != 20*time.Second || c.MaxKernels != 8 {
				t.Errorf("top level: %+v", c)
			}
			if c.Output.InlineCap != 1024 || c.Output.StderrCap != 10000 {
				t.Errorf("output: %+v", c.Output)
			}
			if c.Users.UIDFirst != 70000 || c.Users.UIDLast != 70010 || !c.Users.Enabled {
				t.Errorf("users: %+v", c.Users)
			}
			if c.Profiles["default"].MemoryMax != 64<<20 || c.Profiles["default"].PidsMax != 256 {
				t.Errorf("default profile: %+v", c.Profiles["default"])
			}
			if g := c.Profiles["gpu"]; g.MemoryMax != 1<<30 || g.CPUMax != 2 {
				t.Errorf("gpu profile: %+v", g)
			}
			if c.Ceiling.MemoryMax != 8<<30 || c.Ceiling.PidsMax != 4096 {
				t.Errorf("ceiling: %+v", c.Ceiling)
			}
		}},
		{name: "unknown attribute", src: "socket = \"/a\"\n\ncolour = \"red\"\n", err: []string{"test.hcl:3", "colour"}},
		{name: "unknown block", src: "nope {\n}\n", err: []string{"test.hcl:1", "nope"}},
		{name: "unknown attribute in block", src: "output {\n  inline_cap = 5\n  bogus = 1\n}\n", err: []string{"test.hcl:3", "bogus"}},
		{name: "bad size", src: "profile \"default\" {\n  memory_max = \"lots\"\n}\n", err: []string{"test.hcl:2", "memory_max", "64MiB"}},
		{name: "negative size", src: "ceiling {\n memory_max = \"-1GiB\"\n}\n", err: []string{"test.hcl:2", "memory_max"}},
		{name: "bad duration", src: "\nidle_timeout = \"soon\"\n", err: []string{"test.hcl:2", "idle_timeout", "duration"}},
		{name: "wrong type", src: "max_kernels = \"many\"\n", err: []string{"test.hcl:1", "number is required"}},
		{name: "refuse present but empty", src: "env {\n  refuse = []\n}\n", check: func(t *testing.T, c *Config) {
			if c.Env.Refuse == nil || len(c.Env.Refuse) != 0 {
				t.Errorf("refuse = %#v, want an empty non-nil list (refuse nothing)", c.Env.Refuse)
			}
		}},
		{name: "bad uid range", src: "users {\n  uid_range = \"9-1\"\n}\n", err: []string{"test.hcl:2", "uid_range"}},
		{name: "duplicate profile", src: "profile \"a\" {\n}\nprofile \"a\" {\n}\n", err: []string{"Duplicate profile", `"a"`}},
		{name: "syntax error", src: "socket = \n", err: []string{"test.hcl:1"}},
		{name: "cross-field rule", src: "cell_timeout = \"2h\"\n", err: []string{"max_cell_timeout"}},
		{name: "zero max kernels", src: "max_kernels = 0\n", err: []string{"max_kernels"}},
		{name: "isolation process", src: "isolation = \"process\"\n", check: func(t *testing.T, c *Config) {
			if c.Isolation != kernel.IsolationProcess {
				t.Errorf("isolation = %q", c.Isolation)
			}
		}},
		{name: "default isolation is sandbox", src: "", check: func(t *testing.T, c *Config) {
			if c.Isolation != kernel.IsolationSandbox || c.Cgroup.Parent != "" {
				t.Errorf("isolation %q, cgroup parent %q: want sandbox and the derived parent", c.Isolation, c.Cgroup.Parent)
			}
		}},
		{name: "unknown isolation", src: "\nisolation = \"vm\"\n", err: []string{"test.hcl:2", "isolation", `"sandbox" or "process"`, `"vm"`}},
		{name: "result over its budget", src: "output {\n  inline_cap = \"990KB\"\n}\n", err: []string{"inline_cap + 3 x output.stderr_cap", "1000000"}},
		{name: "persist and checkpoints", src: "checkpoint_max_bytes_per_owner = \"1GiB\"\ncheckpoint_retention = \"2h\"\ncheckpoint_timeout = 30\nprofile \"keep\" {\n  persist = true\n}\n", check: func(t *testing.T, c *Config) {
			if c.Checkpoints.MaxBytesPerOwner != 1<<30 || c.Checkpoints.Retention != 2*time.Hour || c.Checkpoints.Timeout != 30*time.Second {
				t.Errorf("checkpoints = %+v", c.Checkpoints)
			}
			if pol := c.Policies(); !pol["keep"].Persist || pol[DefaultProfile].Persist {
				t.Errorf("policies = %+v, want persist only for keep", pol)
			}
		}},
		{name: "memory merge per profile, off by default", src: "profile \"shared\" {\n  memory_merge = true\n}\n", check: func(t *testing.T, c *Config) {
			if !c.Profiles["shared"].MemoryMerge || c.Profiles[DefaultProfile].MemoryMerge {
				t.Errorf("memory_merge: shared %t, default %t", c.Profiles["shared"].MemoryMerge, c.Profiles[DefaultProfile].MemoryMerge)
			}
			ic := isolateConfig(c, hclog.NewNullLogger())
			if !ic.Profiles["shared"].MemoryMerge || ic.Profiles[DefaultProfile].MemoryMerge {
				t.Errorf("isolate profiles: shared %t, default %t", ic.Profiles["shared"].MemoryMerge, ic.Profiles[DefaultProfile].MemoryMerge)
			}
			if s := SettingsOf(c, "/usr/bin/python3"); !s.Profiles["shared"].MemoryMerge {
				t.Error("/v1/settings does not say the profile merges")
			}
		}},
		{name: "checkpoint defaults", src: "", check: func(t *testing.T, c *Config) {
			if c.Checkpoints.MaxBytesPerOwner != 256<<20 || c.Checkpoints.Retention != 24*time.Hour || c.Profiles[DefaultProfile].Persist {
				t.Errorf("checkpoints = %+v, default persist %v", c.Checkpoints, c.Profiles[DefaultProfile].Persist)
			}
		}},
		{name: "checkpoint store and idle", src: "checkpoint_idle = \"10s\"\ncheckpoint_store = \"s3://b/p\"\ncheckpoint_store_endpoint = \"http://127.0.0.1:9000\"\ncheckpoint_store_allow_http = true\n", check: func(t *testing.T, c *Config) {
			if c.Checkpoints.Idle != 10*time.Second || c.CheckpointStore != (StoreConfig{URL: "s3://b/p", Endpoint: "http://127.0.0.1:9000", AllowHTTP: true}) {
				t.Errorf("checkpoints = %+v, store %+v", c.Checkpoints, c.CheckpointStore)
			}
			if pc := poolCheckpoints(c.Checkpoints); pc.Idle != 10*time.Second {
				t.Errorf("pool idle = %v", pc.Idle)
			}
		}},
		{name: "idle saves off", src: "checkpoint_idle = 0\n", check: func(t *testing.T, c *Config) {
			if pc := poolCheckpoints(c.Checkpoints); c.Checkpoints.Idle != 0 || pc.Idle >= 0 {
				t.Errorf("checkpoint_idle 0: config %v, pool %v (want off)", c.Checkpoints.Idle, pc.Idle)
			}
		}},
		{name: "default idle and store", src: "", check: func(t *testing.T, c *Config) {
			if c.Checkpoints.Idle != 30*time.Second || c.CheckpointStore != (StoreConfig{}) {
				t.Errorf("defaults: idle %v, store %+v", c.Checkpoints.Idle, c.CheckpointStore)
			}
		}},
		{name: "store of another scheme", src: "checkpoint_store = \"gs://b\"\n", err: []string{"checkpoint_store", "s3://bucket[/prefix]"}},
		{name: "store endpoint without a store", src: "checkpoint_store_endpoint = \"h:1\"\n", err: []string{"need checkpoint_store"}},
		{name: "bad checkpoint cap", src: "\ncheckpoint_max_bytes_per_owner = \"much\"\n", err: []string{"test.hcl:2", "checkpoint_max_bytes_per_owner"}},
		{name: "zero checkpoint retention", src: "checkpoint_retention = 0\n", err: []string{"checkpoint_retention"}},
		{name: "spill quota below one spill", src: "output {\n  spill_quota = \"1MB\"\n}\n", err: []string{"spill_quota"}},
		{name: "spill quota", src: "output {\n  spill_quota = \"64MiB\"\n}\n", check: func(t *testing.T, c *Config) {
			if c.Output.SpillQuota != 64<<20 {
				t.Errorf("spill_quota = %d, want %d", c.Output.SpillQuota, 64<<20)
			}
		}},
		{name: "session and env bounds", src: "max_sessions = 10\nmax_sessions_per_owner = 2\nsession_idle_timeout = \"1h\"\nmax_env_names = 8\nmax_env_bytes = \"4KiB\"\n", check: func(t *testing.T, c *Config) {
			want := pool.SessionConfig{MaxSessions: 10, MaxSessionsPerOwner: 2, IdleTimeout: time.Hour, MaxEnvNames: 8, MaxEnvBytes: 4 << 10}
			if c.Sessions != want || poolConfig(c, "/usr/bin/python3", seams{}, hclog.NewNullLogger()).Sessions != want {
				t.Errorf("sessions = %+v, want %+v", c.Sessions, want)
			}
		}},
		{name: "default session bounds", src: "", check: func(t *testing.T, c *Config) {
			if c.Sessions.MaxEnvNames != 64 || c.Sessions.MaxEnvBytes != 32<<10 || c.Sessions.MaxSessions != 1024 {
				t.Errorf("sessions = %+v", c.Sessions)
			}
		}},
		{name: "zero env names", src: "max_env_names = 0\n", err: []string{"max_env_names"}},
	}
	runConfigCases(t, tests)
}

func TestParseSizeAndDuration(t *testing.T) {
	sizes := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"64MiB", 64 << 20, true}, {"1GiB", 1 << 30, true}, {"512M", 512 << 20, true}, {"1GB", 1e9, true},
		{"1048576", 1 << 20, true}, {"0", 0, true}, {"max", 0, true}, {"1.5KiB", 1536, true},
		{"lots", 0, false}, {"-1", 0, false}, {"MiB", 0, false}, {"1e400", 0, false},
	}
	for _, s := range sizes {
		got, err := ParseSize(s.in)
		if (err == nil) != s.ok || (s.ok && got != s.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%t", s.in, got, err, s.want, s.ok)
		}
	}
	durations := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true}, {"1h30m", 90 * time.Minute, true}, {"90", 90 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true}, {"soon", 0, false}, {"-5s", 0, false}, {"-1", 0, false},
		{"0", 0, true}, {"0s", 0, true}, // drain_grace = 0, checkpoint_idle = 0 (off)
		// The largest whole number of seconds a Duration holds; 2^63 ns and
		// anything at or past it is out of range, not an overflow.
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372036.854775808", 0, false}, {"9223372036.8547758", 0, false}, {"1e10", 0, false},
		{"NaN", 0, false}, {"nan", 0, false},
	}
	for _, d := range durations {
		got, err := ParseDuration(d.in)
		if (err == nil) != d.ok || (d.ok && got != d.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%t", d.in, got, err, d.want, d.ok)
		}
	}
}

func TestDefaultPaths(t *testing.T) {
	env := map[string]string{"KERNPOOL_SOCKET": "/custom.sock", "XDG_RUNTIME_DIR": "/run/user/1000"}
	getenv := func(k string) string { return env[k] }
	if got := DefaultSocket(getenv); got != "/custom.sock" {
		t.Errorf("socket with $KERNPOOL_SOCKET = %q", got)
	}
	delete(env, "KERNPOOL_SOCKET")
	sock, state := DefaultSocket(getenv), DefaultStateDir(getenv)
	// filepath.FromSlash: the paths are joined with the OS's separator.
	if os.Getuid() == 0 {
		if sock != filepath.FromSlash("/run/kernpool/kernpool.sock") || state != filepath.FromSlash("/run/kernpool/state") {
			t.Errorf("root defaults: %q %q", sock, state)
		}
	} else if sock != filepath.FromSlash("/run/user/1000/kernpool/kernpool.sock") || state != filepath.FromSlash("/run/user/1000/kernpool/state") {
		t.Errorf("user defaults: %q %q", sock, state)
	}
}

// TestFleetKeys: the fleet keys parse into Config.Fleet; a node with
// fleet_redis needs listen and advertise_url; fleet_heartbeat must be
// positive.
func TestFleetKeys(t *testing.T) {
	src := "fleet_redis = \"unix:///run/redis.sock\"\nnode_name = \"n1\"\nadvertise_url = \"https://10.0.0.5:8443\"\n" +
		"fleet_heartbeat = \"250ms\"\nfleet_node_token_file = \"/etc/kernpool/node.token\"\nfleet_node_ca = \"/etc/kernpool/ca.pem\"\n"
	c, err := ParseConfig([]byte(src), "fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := FleetConfig{Redis: "unix:///run/redis.sock", NodeName: "n1", AdvertiseURL: "https://10.0.0.5:8443",
		Heartbeat: 250 * time.Millisecond, NodeTokenFile: "/etc/kernpool/node.token", NodeCA: "/etc/kernpool/ca.pem"}
	if c.Fleet != want {
		t.Fatalf("Fleet = %+v, want %+v", c.Fleet, want)
	}
	if def := DefaultConfig(); def.Fleet.Redis != "" || def.Fleet.Heartbeat <= 0 {
		t.Fatalf("default Fleet = %+v: want no fleet and a positive heartbeat", def.Fleet)
	}
	if _, err := ParseConfig([]byte("fleet_heartbeat = 0\n"), "f.hcl"); !errors.Is(err, ErrConfig) {
		t.Fatalf("fleet_heartbeat 0: %v", err)
	}
	for _, bad := range []*Config{
		{Fleet: FleetConfig{Redis: "redis://127.0.0.1:6379"}},
		{Fleet: FleetConfig{Redis: "redis://127.0.0.1:6379", AdvertiseURL: "https://x:1"}},
		{Fleet: FleetConfig{Redis: "redis://127.0.0.1:6379", AdvertiseURL: "ftp://x"}, Network: NetworkConfig{Listen: "127.0.0.1:0"}},
	} {
		if _, err := joinFleet(context.Background(), bad); !errors.Is(err, ErrConfig) {
			t.Errorf("joinFleet(%+v) = %v, want a config error", bad.Fleet, err)
		}
	}
	if f, err := joinFleet(context.Background(), &Config{}); f != nil || err != nil {
		t.Fatalf("no fleet_redis: %v %v", f, err)
	}
}

// The non-root defaults (the tests run as root): $XDG_RUNTIME_DIR, else a
// per-uid dir in the temp dir; Windows (uid -1) the user's temp dir.
func TestDefaultBaseNonRoot(t *testing.T) {
	tmp := os.TempDir()
	for _, c := range []struct {
		goos, xdg string
		uid       int
		want      string
	}{
		{"linux", "/run/user/1000", 1000, filepath.FromSlash("/run/user/1000/kernpool")},
		{"linux", "", 1000, filepath.Join(tmp, "kernpool-1000")},
		{"linux", "/run/user/0", 0, "/run/kernpool"}, // a constant, not joined
		{"windows", "", -1, filepath.Join(tmp, "kernpool")},
		{"windows", `C:\run`, -1, filepath.Join(`C:\run`, "kernpool")},
	} {
		getenv := func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": c.xdg}[k] }
		if got := baseFor(getenv, c.goos, c.uid); got != c.want {
			t.Errorf("%s uid %d XDG_RUNTIME_DIR=%q: base %q, want %q", c.goos, c.uid, c.xdg, got, c.want)
		}
	}
}

// A file with several mistakes reports each on its own line, each from
// its position, so an operator fixes them in one pass (HCL reports them
// in no set order).
func TestConfigErrorsOnePerLine(t *testing.T) {
	_, err := ParseConfig([]byte("colour = 1\nshade = 2\n"), "test.hcl")
	if err == nil {
		t.Fatal("no error for two unknown keys")
	}
	msg, ok := strings.CutPrefix(err.Error(), "invalid configuration: ")
	if !ok {
		t.Fatalf("error %q does not start with the sentinel", err)
	}
	var at []string
	for _, l := range strings.Split(msg, "\n") {
		pos, _, _ := strings.Cut(l, ": ")
		at = append(at, pos)
	}
	sort.Strings(at)
	if want := []string{"test.hcl:1,1-7", "test.hcl:2,1-6"}; !reflect.DeepEqual(at, want) {
		t.Errorf("error lines start %q, want %q: %q", at, want, err)
	}
}
