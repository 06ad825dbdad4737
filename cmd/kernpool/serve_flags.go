package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool/daemon"
)

// serveFlags are serve's (and doctor's) flags, typed. Their defaults,
// shown in --help, are daemon.DefaultConfig's (one definition; a test
// checks docs/config.md against them); only the flags given on the
// command line override the config file (pflag's Changed).
type serveFlags struct {
	fs                                         *pflag.FlagSet
	socket, config, stateDir, logLevel, interp string
	isolation, cgroupParent, passthrough       string
	metricsListen, socketGroup, timeoutAction  string
	listen                                     string
	memoryMax, pidsMax                         int64
	cpuMax                                     float64
	maxKernels, maxToolCalls, spares           int
	idleTimeout, cellTimeout, maxCellTimeout   time.Duration
	toolCallTimeout, drainGrace, interruptGr   time.Duration
	logJSON                                    bool
}

func addServeFlags(fs *pflag.FlagSet) *serveFlags {
	def := daemon.DefaultConfig()
	p := def.Profiles[daemon.DefaultProfile]
	f := &serveFlags{fs: fs}
	fs.StringVar(&f.socket, "socket", "", "Unix socket to serve on (default $KERNPOOL_SOCKET, else a per-user or system path)")
	fs.StringVar(&f.config, "config", "", "HCL config `file` (flags override it; default "+daemon.DefaultConfigFile+" when it exists)")
	fs.StringVar(&f.stateDir, "state-dir", "", "state `dir` for kernel staging dirs (default beside the socket)")
	fs.StringVar(&f.isolation, "isolation", string(def.Isolation), "`mode`: sandbox (refuse to start without every configured protection) or process (kernels may share the daemon's uid)")
	fs.StringVar(&f.cgroupParent, "cgroup-parent", "", "pool parent cgroup `name` (default kernpool-<hash of the state dir>)")
	newSize(fs, &f.memoryMax, "memory-max", p.MemoryMax, "default profile memory limit (0: unlimited)")
	fs.Int64Var(&f.pidsMax, "pids-max", p.PidsMax, "default profile task limit (0: unlimited)")
	fs.Float64Var(&f.cpuMax, "cpu-max", p.CPUMax, "default profile CPU quota in `cores`, e.g. 0.5 (0: unlimited)")
	fs.StringVar(&f.passthrough, "passthrough", "", "extra environment `NAME[,NAME...]` every kernel keeps")
	fs.StringVar(&f.logLevel, "log-level", def.LogLevel, "log `level`: trace, debug, info, warn, error")
	fs.BoolVar(&f.logJSON, "log-json", def.LogJSON, "log one JSON object per line")
	fs.StringVar(&f.interp, "interpreter", "", "default python3 `path` (default: python3 on PATH, shims resolved)")
	fs.IntVar(&f.maxKernels, "max-kernels", def.MaxKernels, "cap on live kernels across owners")
	fs.IntVar(&f.maxToolCalls, "max-tool-calls", def.MaxToolCalls, "tool-call budget per cell")
	newDuration(fs, &f.idleTimeout, "idle-timeout", def.IdleTimeout, "reap kernels idle this long")
	newDuration(fs, &f.cellTimeout, "cell-timeout", def.CellTimeout, "default cell timeout")
	newDuration(fs, &f.maxCellTimeout, "max-cell-timeout", def.MaxCellTimeout, "largest cell timeout a request may ask for")
	newDuration(fs, &f.toolCallTimeout, "tool-call-timeout", def.ToolCallTimeout, "how long a streamed tool call waits for its answer")
	newDuration(fs, &f.drainGrace, "drain-grace", def.DrainGrace, "how long running cells may finish on SIGTERM")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "also serve GET /metrics on this TCP `addr`, e.g. 127.0.0.1:9464 (default: off; /metrics is always on the API socket)")
	fs.StringVar(&f.listen, "listen", "", "also serve the API on this TCP `addr` (e.g. 10.0.0.5:8443): TLS and token or client_cert blocks from the config; plain HTTP only on loopback (docs/fleet.md)")
	fs.StringVar(&f.socketGroup, "socket-group", "", "chgrp the API socket to this `group` (name or gid), mode 0660")
	fs.StringVar(&f.timeoutAction, "timeout-action", p.TimeoutAction, "default profile: what a cell timeout does (`action`): interrupt (keeps the kernel's state) or kill")
	newDuration(fs, &f.interruptGr, "interrupt-grace", p.InterruptGrace, "default profile: how long an interrupted cell may take to stop before its kernel is killed")
	fs.IntVar(&f.spares, "spares", p.Spares, "default profile: kernels kept started ahead of demand for new owners (0: none)")
	return f
}

// loadServeConfig builds the config: defaults, the file, the set flags,
// then the default paths for what is still empty (Config.Complete).
func loadServeConfig(f *serveFlags, getenv func(string) string) (*daemon.Config, error) {
	cfg := daemon.DefaultConfig()
	file := f.config
	if file == "" && runtime.GOOS != "windows" {
		if _, err := os.Stat(daemon.DefaultConfigFile); err == nil {
			file = daemon.DefaultConfigFile
		}
	}
	if file != "" {
		var err error
		if cfg, err = daemon.LoadConfigFile(file); err != nil {
			return nil, err
		}
		cfg.File = file
	}
	if err := f.apply(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Complete(getenv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// apply sets the config fields of the flags that were given.
func (f *serveFlags) apply(cfg *daemon.Config) error {
	def := cfg.Profiles[daemon.DefaultProfile]
	set := f.fs.Changed
	var err error
	setIf := func(name string, apply func()) {
		if set(name) {
			apply()
		}
	}
	setIf("socket", func() { cfg.Socket = f.socket })
	setIf("state-dir", func() { cfg.StateDir = f.stateDir })
	setIf("isolation", func() { cfg.Isolation, err = kernel.ParseIsolationMode(f.isolation) })
	setIf("cgroup-parent", func() { cfg.Cgroup.Parent = f.cgroupParent })
	setIf("log-level", func() { cfg.LogLevel = f.logLevel })
	setIf("log-json", func() { cfg.LogJSON = f.logJSON })
	setIf("interpreter", func() { cfg.Interpreter = f.interp })
	setIf("passthrough", func() { cfg.Env.Passthrough = append(cfg.Env.Passthrough, splitList(f.passthrough)...) })
	setIf("memory-max", func() { def.MemoryMax = f.memoryMax })
	setIf("pids-max", func() { def.PidsMax = f.pidsMax })
	setIf("cpu-max", func() { def.CPUMax = f.cpuMax })
	setIf("max-kernels", func() { cfg.MaxKernels = f.maxKernels })
	setIf("max-tool-calls", func() { cfg.MaxToolCalls = f.maxToolCalls })
	setIf("idle-timeout", func() { cfg.IdleTimeout = f.idleTimeout })
	setIf("cell-timeout", func() { cfg.CellTimeout = f.cellTimeout })
	setIf("max-cell-timeout", func() { cfg.MaxCellTimeout = f.maxCellTimeout })
	setIf("tool-call-timeout", func() { cfg.ToolCallTimeout = f.toolCallTimeout })
	setIf("drain-grace", func() { cfg.DrainGrace = f.drainGrace })
	setIf("metrics-listen", func() { cfg.MetricsListen = f.metricsListen })
	setIf("socket-group", func() { cfg.SocketGroup = f.socketGroup })
	setIf("listen", func() { cfg.Network.Listen = f.listen })
	setIf("timeout-action", func() { def.TimeoutAction = f.timeoutAction })
	setIf("interrupt-grace", func() { def.InterruptGrace = f.interruptGr })
	setIf("spares", func() { def.Spares = f.spares })
	cfg.Profiles[daemon.DefaultProfile] = def
	if err != nil {
		return fmt.Errorf("%w: --isolation: %v", daemon.ErrConfig, err)
	}
	return nil
}

// splitList splits "a,b, c" into its non-empty trimmed names.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}
