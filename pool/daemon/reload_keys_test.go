package daemon_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// reloadDaemon starts a daemon on cfg whose log the test reads, with
// the handler served on a socket of the test's own.
func reloadDaemon(t *testing.T, cfg *daemon.Config) (*daemon.Daemon, *api.Client, *testenv.SyncBuffer) {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	d, err := daemon.New(context.Background(), cfg, daemon.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(context.Background()) })
	return d, serveHandler(t, d, cfg), logs
}

// cloneConfig is a copy of c that shares no map or slice with it, so a
// test may change the copy without touching the running configuration.
func cloneConfig(c *daemon.Config) *daemon.Config {
	n := *c
	n.Profiles = maps.Clone(c.Profiles)
	for name, p := range n.Profiles {
		p.Passthrough, p.Preload = slices.Clone(p.Passthrough), slices.Clone(p.Preload)
		n.Profiles[name] = p
	}
	n.Env.Passthrough, n.Env.Refuse = slices.Clone(c.Env.Passthrough), slices.Clone(c.Env.Refuse)
	n.Network.Tokens, n.Network.ClientCerts = slices.Clone(c.Network.Tokens), slices.Clone(c.Network.ClientCerts)
	return &n
}

// restartSettings are the settings the last "only a restart applies
// them" line of log names.
func restartSettings(log string) []string {
	const marker = "only a restart applies them"
	i := strings.LastIndex(log, marker)
	if i < 0 {
		return nil
	}
	line := log[i:]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	_, v, ok := strings.Cut(line, "settings=")
	if !ok {
		return nil
	}
	return strings.Split(strings.ReplaceAll(strings.Trim(v, `"`), `\"`, `"`), ", ")
}

// withProfile changes the default profile of c.
func withProfile(c *daemon.Config, change func(*daemon.Profile)) {
	p := c.Profiles[daemon.DefaultProfile]
	change(&p)
	c.Profiles[daemon.DefaultProfile] = p
}

// listenWith turns the network listener on in c: on loopback with a
// token, with TLS when cert is set and client certificates when ca is.
func listenWith(c *daemon.Config, cert, ca string) {
	c.Network.Listen = "127.0.0.1:0"
	c.Network.Tokens = []daemon.Credential{{Name: "ops", SHA256: api.TokenDigest(adminToken), Admin: true}}
	if cert != "" {
		c.Network.TLSCert, c.Network.TLSKey = cert, cert
	}
	c.Network.TLSClientCA = ca
}

// TestReloadRestartKeysChangeNothing goes through every setting of
// docs/config.md that a reload does not apply (the list is written out
// here, not derived from the code): a reload changing one is accepted,
// logs the setting by its config name as needing a restart, and leaves
// the running configuration as it was. The profile settings a kernel's
// sandbox was checked for at start (and adding or removing a profile)
// refuse the whole reload, naming the profile, and the reloadable change
// that came with them is not applied either. Last, what the pool and the
// isolator enforce is still the start's: the cell timeout, max_kernels
// and the ceiling.
func TestReloadRestartKeysChangeNothing(t *testing.T) {
	cfg := testConfig(t)
	withProfile(cfg, func(p *daemon.Profile) { p.Spares = 0 })
	d, c, logs := reloadDaemon(t, cfg)
	ctx := context.Background()
	dir := testTempDir(t)

	// overCeiling runs a cell whose limits pass the start's ceiling but
	// not the one the reload asked for (which must not hold).
	overCeiling := func() {
		res, err := c.Execute(ctx, pool.Request{Owner: "ceiling", Code: "1",
			Limits: pool.Limits{MemoryMax: 2 << 30, PidsMax: 400, CPUMax: 1.75}})
		if err != nil || res.Status != pool.StatusSuccess {
			t.Errorf("limits over the reloaded ceiling, under the start's: %+v, %v; want the start's ceiling to hold", res, err)
		}
	}
	restart := []struct {
		key   string
		set   func(*daemon.Config)
		probe func() // checks the running value still holds
	}{
		{"isolation", func(c *daemon.Config) {
			if c.Isolation == kernel.IsolationProcess {
				c.Isolation = kernel.IsolationSandbox
			} else {
				c.Isolation = kernel.IsolationProcess
			}
		}, nil},
		{"socket", func(c *daemon.Config) { c.Socket = filepath.Join(dir, "other.sock") }, nil},
		{"state_dir", func(c *daemon.Config) { c.StateDir = filepath.Join(dir, "state") }, nil},
		{"log_level", func(c *daemon.Config) { c.LogLevel = "debug" }, nil},
		{"log_json", func(c *daemon.Config) { c.LogJSON = true }, nil},
		{"interpreter", func(c *daemon.Config) { c.Interpreter = "/usr/bin/python3.11" }, nil},
		{"idle_timeout", func(c *daemon.Config) { c.IdleTimeout = 7 * time.Minute }, nil},
		{"cell_timeout", func(c *daemon.Config) { c.CellTimeout = time.Millisecond }, nil},
		{"max_cell_timeout", func(c *daemon.Config) { c.MaxCellTimeout = 2 * time.Hour }, nil},
		{"max_kernels", func(c *daemon.Config) { c.MaxKernels = 1 }, nil},
		{"max_tool_calls", func(c *daemon.Config) { c.MaxToolCalls = 3 }, nil},
		{"tool_call_timeout", func(c *daemon.Config) { c.ToolCallTimeout = 3 * time.Second }, nil},
		{"drain_grace", func(c *daemon.Config) { c.DrainGrace = 3 * time.Second }, nil},
		{"socket_group", func(c *daemon.Config) { c.SocketGroup = "0" }, nil},
		{"metrics_listen", func(c *daemon.Config) { c.MetricsListen = "127.0.0.1:0" }, nil},
		{"audit_log", func(c *daemon.Config) { c.Audit.Path = filepath.Join(dir, "audit.log") }, nil},
		{"audit_code", func(c *daemon.Config) { c.Audit.IncludeCode = true }, nil},
		{"audit_max_size", func(c *daemon.Config) { c.Audit.MaxSize = 1 << 20 }, nil},
		{"audit_keep", func(c *daemon.Config) { c.Audit.Keep = 2 }, nil},
		{"checkpoint_max_bytes_per_owner", func(c *daemon.Config) { c.Checkpoints.MaxBytesPerOwner = 1 << 20 }, nil},
		{"checkpoint_retention", func(c *daemon.Config) { c.Checkpoints.Retention = time.Hour }, nil},
		{"checkpoint_timeout", func(c *daemon.Config) { c.Checkpoints.Timeout = 5 * time.Second }, nil},
		{"checkpoint_idle", func(c *daemon.Config) { c.Checkpoints.Idle = 0 }, nil},
		{"checkpoint_store", func(c *daemon.Config) { c.CheckpointStore.URL = "s3://kp-reload-test/ckpt" }, nil},
		{"checkpoint_store_endpoint", func(c *daemon.Config) {
			c.CheckpointStore.URL, c.CheckpointStore.Endpoint = "s3://kp-reload-test", "s3.example.com"
		}, nil},
		{"checkpoint_store_allow_http", func(c *daemon.Config) {
			c.CheckpointStore.URL, c.CheckpointStore.Endpoint, c.CheckpointStore.AllowHTTP = "s3://kp-reload-test", "http://127.0.0.1:9", true
		}, nil},
		// The listener's settings need a token, or certificates, to validate.
		{"listen", func(c *daemon.Config) { listenWith(c, "", "") }, nil},
		{"tls_cert", func(c *daemon.Config) { listenWith(c, filepath.Join(dir, "node.pem"), "") }, nil},
		{"tls_key", func(c *daemon.Config) { listenWith(c, filepath.Join(dir, "node.pem"), "") }, nil},
		{"tls_client_ca", func(c *daemon.Config) { listenWith(c, filepath.Join(dir, "node.pem"), filepath.Join(dir, "ca.pem")) }, nil},
		{"fleet_redis", func(c *daemon.Config) {
			listenWith(c, "", "")
			c.Fleet.Redis, c.Fleet.AdvertiseURL = "redis://127.0.0.1:9/0", "http://127.0.0.1:9"
		}, nil},
		{"advertise_url", func(c *daemon.Config) {
			listenWith(c, "", "")
			c.Fleet.Redis, c.Fleet.AdvertiseURL = "redis://127.0.0.1:9/0", "http://127.0.0.1:9"
		}, nil},
		{"listen_max_conns", func(c *daemon.Config) { c.Network.MaxConns = 3 }, nil},
		{"listen_max_header_bytes", func(c *daemon.Config) { c.Network.MaxHeaderBytes = 4 << 10 }, nil},
		{"listen_header_timeout", func(c *daemon.Config) { c.Network.HeaderTimeout = 3 * time.Second }, nil},
		{"listen_idle_timeout", func(c *daemon.Config) { c.Network.IdleTimeout = 3 * time.Second }, nil},
		{"max_sessions", func(c *daemon.Config) { c.Sessions.MaxSessions = 3 }, nil},
		{"max_sessions_per_owner", func(c *daemon.Config) { c.Sessions.MaxSessionsPerOwner = 2 }, nil},
		{"session_idle_timeout", func(c *daemon.Config) { c.Sessions.IdleTimeout = time.Hour }, nil},
		{"max_env_names", func(c *daemon.Config) { c.Sessions.MaxEnvNames = 3 }, nil},
		{"max_env_bytes", func(c *daemon.Config) { c.Sessions.MaxEnvBytes = 1 << 10 }, nil},
		{"node_name", func(c *daemon.Config) { c.Fleet.NodeName = "other-node" }, nil},
		{"fleet_heartbeat", func(c *daemon.Config) { c.Fleet.Heartbeat = 5 * time.Second }, nil},
		{"fleet_node_token_file", func(c *daemon.Config) { c.Fleet.NodeTokenFile = filepath.Join(dir, "token") }, nil},
		{"fleet_node_ca", func(c *daemon.Config) { c.Fleet.NodeCA = filepath.Join(dir, "ca.pem") }, nil},
		{"fleet_kubernetes_service", func(c *daemon.Config) { c.Fleet.KubernetesService = "kernpool-node" }, nil},
		{"fleet_kubernetes_namespace", func(c *daemon.Config) { c.Fleet.KubernetesNamespace = "kp" }, nil},
		{"env.passthrough", func(c *daemon.Config) { c.Env.Passthrough = append(c.Env.Passthrough, "KP_RELOAD_TEST") }, nil},
		{"env.refuse", func(c *daemon.Config) { c.Env.Refuse = []string{"KP_*_SECRET"} }, nil},
		{"output.redact_patterns", func(c *daemon.Config) { c.Output.RedactPatterns = !c.Output.RedactPatterns }, nil},
		{"output.inline_cap", func(c *daemon.Config) { c.Output.InlineCap = 1000 }, nil},
		{"output.stderr_cap", func(c *daemon.Config) { c.Output.StderrCap = 1000 }, nil},
		{"output.spill_cap", func(c *daemon.Config) { c.Output.SpillCap = 2_000_000 }, nil},
		{"output.spill_quota", func(c *daemon.Config) { c.Output.SpillQuota = 30_000_000 }, nil},
		{"cgroup.parent", func(c *daemon.Config) { c.Cgroup.Parent += "-other" }, nil},
		{"cgroup.enabled", func(c *daemon.Config) { c.Cgroup.Enabled = !c.Cgroup.Enabled }, nil},
		{"users.enabled", func(c *daemon.Config) { c.Users.Enabled = !c.Users.Enabled }, nil},
		{"users.uid_range", func(c *daemon.Config) { c.Users.UIDFirst, c.Users.UIDLast = 61000, 61099 }, nil},
		{"users.per_owner", func(c *daemon.Config) { c.Users.PerOwner = !c.Users.PerOwner }, nil},
		{"ceiling.memory_max", func(c *daemon.Config) { c.Ceiling.MemoryMax, c.Ceiling.PidsMax, c.Ceiling.CPUMax = 1<<30, 300, 1.5 }, overCeiling},
		{"ceiling.pids_max", func(c *daemon.Config) { c.Ceiling.PidsMax = 300 }, nil},
		{"ceiling.cpu_max", func(c *daemon.Config) { c.Ceiling.CPUMax = 1.5 }, nil},
		{`profile "default" passthrough`, func(c *daemon.Config) {
			withProfile(c, func(p *daemon.Profile) { p.Passthrough = []string{"KP_RELOAD_MODE"} })
		}, nil},
	}
	for _, r := range restart {
		before := cloneConfig(d.Config())
		next := cloneConfig(before)
		r.set(next)
		mark := len(logs.String())
		if err := d.Reload(next); err != nil {
			t.Errorf("%s: reload refused: %v (the docs list it as needing a restart)", r.key, err)
			continue
		}
		if got := restartSettings(logs.String()[mark:]); !slices.Contains(got, r.key) {
			t.Errorf("%s: the reload names %q as needing a restart, not %s\n%s", r.key, got, r.key, logs.String()[mark:])
		}
		if got := d.Config(); !reflect.DeepEqual(got, before) {
			t.Errorf("%s: a reload changed the running configuration:\n%+v\nwant\n%+v", r.key, got, before)
		}
		if r.probe != nil {
			r.probe()
		}
	}

	// A reloadable change that comes with a refused one is not applied.
	refused := []struct {
		what string
		set  func(*daemon.Config)
	}{
		{"network", func(c *daemon.Config) { withProfile(c, func(p *daemon.Profile) { p.Network = !p.Network }) }},
		{"tmp_size", func(c *daemon.Config) { withProfile(c, func(p *daemon.Profile) { p.TmpSize = 32 << 20 }) }},
		{"pty_max", func(c *daemon.Config) { withProfile(c, func(p *daemon.Profile) { p.PtyMax = 4 }) }},
		{"memory_merge", func(c *daemon.Config) { withProfile(c, func(p *daemon.Profile) { p.MemoryMerge = !p.MemoryMerge }) }},
		{"a new profile", func(c *daemon.Config) { c.Profiles["extra"] = c.Profiles[daemon.DefaultProfile] }},
		{"a removed profile", func(c *daemon.Config) {
			c.Profiles["extra"] = c.Profiles[daemon.DefaultProfile] // kept: "default" must exist
			delete(c.Profiles, daemon.DefaultProfile)
		}},
	}
	for _, r := range refused {
		before := cloneConfig(d.Config())
		next := cloneConfig(before)
		r.set(next)
		next.MaxKernelsPerOwner = 7
		withProfile(next, func(p *daemon.Profile) { p.PidsMax = 77 })
		err := d.Reload(next)
		if err == nil || !strings.Contains(err.Error(), "profile") {
			t.Errorf("%s: reload = %v, want refused naming the profile", r.what, err)
		}
		if got := d.Config(); !reflect.DeepEqual(got, before) {
			t.Errorf("%s: a refused reload changed the running configuration: %+v", r.what, got)
		}
	}

	// What runs is still the start's configuration: a 1 ms cell_timeout,
	// max_kernels 1, a ceiling of 1 GiB and a per-owner cap of 7 were
	// reloaded above and must not hold.
	for _, owner := range []string{"a", "b"} {
		res, err := c.Execute(ctx, pool.Request{Owner: owner, Code: "import time\ntime.sleep(0.2)\nprint('done')",
			Limits: pool.Limits{MemoryMax: 2 << 30}})
		if err != nil || res.Status != pool.StatusSuccess || res.Output != "done\n" {
			t.Fatalf("cell of %s after the restart-only reloads: %+v, %v", owner, res, err)
		}
		if iso := res.Kernel.Isolation; os.Geteuid() == 0 && (iso == nil || iso.PidsMax != cfg.Profiles[daemon.DefaultProfile].PidsMax) {
			t.Errorf("kernel of %s after refused reloads: %+v, want pids_max %d", owner, iso, cfg.Profiles[daemon.DefaultProfile].PidsMax)
		}
	}
	live := map[string]bool{}
	for _, k := range d.Pool().List() {
		live[k.Owner] = true
	}
	if !live["a"] || !live["b"] {
		t.Errorf("live owners %v, want a's and b's kernels both (max_kernels is the start's %d)", live, cfg.MaxKernels)
	}
}

// cgroupValue reads file of pid's cgroup of controller (v1), or of its
// v2 group when the host has no v1 hierarchy for controller.
func cgroupValue(t *testing.T, pid int, controller, file string) (string, bool) {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), controller) {
			path = filepath.Join("/sys/fs/cgroup", controller, parts[2], file)
			break
		}
		if parts[0] == "0" {
			path = filepath.Join("/sys/fs/cgroup", parts[2], file)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// kernelPid is the pid of the kernel id as the daemon lists it.
func kernelPidOf(t *testing.T, d *daemon.Daemon, id string) int {
	t.Helper()
	for _, k := range d.Pool().List() {
		if k.ID == id {
			return k.Pid
		}
	}
	t.Fatalf("kernel %s not listed", id)
	return 0
}

// TestReloadAppliesProfileSettings: a reload's memory_swap_max,
// pids_max, cpu_max and cpu_weight (root: in the cgroup of a kernel
// started after it; memory_max has its own tests, TestReloadAndHandler
// and cmd/kernpool's TestReloadMemoryLimit), interrupt_grace,
// files_max_bytes, preload, spares and drain_on_term hold from the next
// kernel, cell, upload or SIGTERM on.
func TestReloadAppliesProfileSettings(t *testing.T) {
	cfg := testConfig(t)
	withProfile(cfg, func(p *daemon.Profile) { p.Spares = 0 })
	d, c, logs := reloadDaemon(t, cfg)
	ctx := context.Background()
	next := cloneConfig(d.Config())
	withProfile(next, func(p *daemon.Profile) {
		p.InterruptGrace, p.FilesMaxBytes = time.Millisecond, 1024
		p.Spares, p.Preload = 1, []string{"colorsys"}
		p.MemoryMax, p.MemorySwapMax, p.PidsMax, p.CPUMax, p.CPUWeight = 256<<20, 64<<20, 77, 0.5, 400
	})
	next.DrainOnTerm = true
	if err := d.Reload(next); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "drain_on_term: false -> true") {
		t.Errorf("the reload does not log drain_on_term:\n%s", logs.String())
	}
	// cmd/kernpool's SIGTERM handler reads it from Config.
	if !d.Config().DrainOnTerm {
		t.Error("drain_on_term is off after a reload turned it on")
	}

	// spares 1 with preload: a spare appears, and has the module imported.
	deadline := time.Now().Add(testenv.Patience)
	for !slices.ContainsFunc(d.Pool().List(), func(k pool.KernelInfo) bool { return k.Spare }) {
		if time.Now().After(deadline) {
			t.Fatal("no spare after a reload set spares = 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := c.Execute(ctx, pool.Request{Owner: "p", Code: "import sys\nprint('colorsys' in sys.modules)"})
	if err != nil || res.Output != "True\n" {
		t.Fatalf("preload after the reload: %+v, %v", res, err)
	}
	if os.Geteuid() == 0 {
		checkReloadedLimits(t, d, res)
	}

	// files_max_bytes 1024: 1025 bytes are too large, 1024 are not.
	target := api.FileTarget{Owner: "p"}
	if _, err := c.UploadFile(ctx, target, "big", strings.NewReader(strings.Repeat("x", 1025)), 1025); apiCode(err) != api.CodeTooLarge {
		t.Errorf("1025 bytes under a reloaded files_max_bytes 1024: %v, want too_large", err)
	}
	if _, err := c.UploadFile(ctx, target, "fits", strings.NewReader(strings.Repeat("x", 1024)), 1024); err != nil {
		t.Errorf("1024 bytes under files_max_bytes 1024: %v", err)
	}

	// interrupt_grace 1ms: a cell that takes 0.3 s to stop after its
	// interrupt costs the kernel (the default 2 s would keep it).
	res, err = c.Execute(ctx, pool.Request{Owner: "p", Timeout: 200 * time.Millisecond,
		Code: "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    time.sleep(0.3)\n"})
	if err != nil || res.Status != pool.StatusTimeout || res.Kernel.StatePreserved {
		t.Fatalf("a slow-to-stop cell under interrupt_grace 1ms: %+v, %v; want a timeout that lost the kernel", res, err)
	}
	if errors.Is(err, pool.ErrQuota) {
		t.Fatal(err)
	}
}

// TestReloadAppliesPersist: persist turned on by a reload decides the
// teardown of a kernel started before it: evicted at max_kernels, the
// kernel is saved and its owner's next cell finds its variables.
func TestReloadAppliesPersist(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxKernels = 1
	withProfile(cfg, func(p *daemon.Profile) { p.Spares = 0 })
	d, c, _ := reloadDaemon(t, cfg)
	ctx := context.Background()
	if res, err := c.Execute(ctx, pool.Request{Owner: "o", Code: "x = 42"}); err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("first cell: %+v, %v", res, err)
	}
	next := cloneConfig(d.Config())
	withProfile(next, func(p *daemon.Profile) { p.Persist = true })
	if err := d.Reload(next); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Execute(ctx, pool.Request{Owner: "e", Code: "1"}); err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("the evicting cell: %+v, %v", res, err)
	}
	res, err := c.Execute(ctx, pool.Request{Owner: "o", Code: "print(x)"})
	if err != nil || res.Output != "42\n" || !res.Kernel.Restored {
		t.Fatalf("o's cell after its kernel was evicted under a reloaded persist: %+v, %v; want 42 restored", res, err)
	}
}

// checkReloadedLimits checks the limits TestReloadAppliesProfileSettings
// reloads in the cgroup of res's kernel.
func checkReloadedLimits(t *testing.T, d *daemon.Daemon, res *pool.Result) {
	t.Helper()
	if iso := res.Kernel.Isolation; iso == nil || iso.PidsMax != 77 || iso.CPUMax != 0.5 || iso.MemoryMax != 256<<20 {
		t.Errorf("kernel after the reload: %+v, want pids 77, cpu 0.5, memory 256MiB", iso)
	}
	pid := kernelPidOf(t, d, res.Kernel.ID)
	if v, ok := cgroupValue(t, pid, "pids", "pids.max"); !ok || v != "77" {
		t.Errorf("pids.max %q (%t), want 77", v, ok)
	}
	// memory+swap: v1's memsw limit (when the host accounts swap), v2's
	// swap alone.
	if v, ok := cgroupValue(t, pid, "memory", "memory.memsw.limit_in_bytes"); ok && v != strconv.Itoa(320<<20) {
		t.Errorf("memory.memsw.limit_in_bytes %s, want 320MiB", v)
	} else if v, ok := cgroupValue(t, pid, "memory", "memory.swap.max"); ok && v != strconv.Itoa(64<<20) {
		t.Errorf("memory.swap.max %s, want 64MiB", v)
	}
	// Weight 400 is v1 shares 2 + 399*262142/9999 = 10462.
	if v, ok := cgroupValue(t, pid, "cpu", "cpu.shares"); ok && v != "10462" {
		t.Errorf("cpu.shares %s, want 10462 (weight 400)", v)
	} else if v, ok2 := cgroupValue(t, pid, "cpu", "cpu.weight"); !ok && (!ok2 || v != "400") {
		t.Errorf("cpu.weight %q (%t), want 400", v, ok2)
	}
}
