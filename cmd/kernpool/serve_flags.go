package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool/daemon"
)

// serveFlags are serve's flags as typed; only the ones given on the
// command line override the config file (found with FlagSet.Visit).
type serveFlags struct {
	socket, config, stateDir, logLevel, interpreter     string
	isolation, cgroupParent                             string
	memoryMax, pidsMax, cpuMax, passthrough             string
	idleTimeout, cellTimeout, maxCellTimeout            string
	toolCallTimeout, drainGrace, maxKernels, maxToolCls string
	metricsListen, socketGroup                          string
	timeoutAction, interruptGrace                       string
	logJSON                                             bool
}

func addServeFlags(fs *flag.FlagSet) *serveFlags {
	f := &serveFlags{}
	fs.StringVar(&f.socket, "socket", "", "Unix socket to serve on (default $KERNPOOL_SOCKET, else a per-user or system path)")
	fs.StringVar(&f.config, "config", "", "HCL config `file` (flags override it)")
	fs.StringVar(&f.stateDir, "state-dir", "", "state `dir` for kernel staging dirs")
	fs.StringVar(&f.isolation, "isolation", "", "`mode`: sandbox (default: refuse to start without every configured protection) or process (kernels may share the daemon's uid)")
	fs.StringVar(&f.cgroupParent, "cgroup-parent", "", "pool parent cgroup `name` (default kernpool-<hash of the state dir>)")
	fs.StringVar(&f.memoryMax, "memory-max", "", "default profile memory limit, e.g. 64MiB (0: unlimited)")
	fs.StringVar(&f.pidsMax, "pids-max", "", "default profile task limit (0: unlimited)")
	fs.StringVar(&f.cpuMax, "cpu-max", "", "default profile CPU quota in `cores`, e.g. 0.5 (0: unlimited)")
	fs.StringVar(&f.passthrough, "passthrough", "", "extra environment `NAME[,NAME...]` every kernel keeps")
	fs.StringVar(&f.logLevel, "log-level", "", "log level: trace, debug, info, warn, error (default info)")
	fs.BoolVar(&f.logJSON, "log-json", false, "log one JSON object per line")
	fs.StringVar(&f.interpreter, "interpreter", "", "default python3 `path` (default: python3 on PATH, shims resolved)")
	fs.StringVar(&f.maxKernels, "max-kernels", "", "cap on live kernels across owners (default 64)")
	fs.StringVar(&f.maxToolCls, "max-tool-calls", "", "tool-call budget per cell (default 50)")
	fs.StringVar(&f.idleTimeout, "idle-timeout", "", "reap kernels idle this long (default 30m)")
	fs.StringVar(&f.cellTimeout, "cell-timeout", "", "default cell timeout (default 5m)")
	fs.StringVar(&f.maxCellTimeout, "max-cell-timeout", "", "largest cell timeout a request may ask for (default 1h)")
	fs.StringVar(&f.toolCallTimeout, "tool-call-timeout", "", "how long a streamed tool call waits for its answer (default 2m)")
	fs.StringVar(&f.drainGrace, "drain-grace", "", "how long running cells may finish on SIGTERM (default 10s)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "also serve GET /metrics on this TCP `addr`, e.g. 127.0.0.1:9464 (default: off; /metrics is always on the API socket)")
	fs.StringVar(&f.socketGroup, "socket-group", "", "chgrp the API socket to this `group` (name or gid), mode 0660")
	fs.StringVar(&f.timeoutAction, "timeout-action", "", "default profile: what a cell timeout does, interrupt (keeps the kernel's state) or kill (default interrupt)")
	fs.StringVar(&f.interruptGrace, "interrupt-grace", "", "default profile: how long an interrupted cell may take to stop before its kernel is killed (default 2s)")
	return f
}

// loadServeConfig builds the config: defaults, the file, the set flags,
// then the default paths for what is still empty.
func loadServeConfig(fs *flag.FlagSet, f *serveFlags, getenv func(string) string) (*daemon.Config, error) {
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
	var errs []string
	fs.Visit(func(fl *flag.Flag) {
		if err := f.apply(cfg, fl.Name); err != nil {
			errs = append(errs, fmt.Sprintf("--%s: %v", fl.Name, err))
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", daemon.ErrConfig, strings.Join(errs, "; "))
	}
	if err := cfg.Complete(getenv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// apply sets the config field of one flag that was given.
func (f *serveFlags) apply(cfg *daemon.Config, name string) error {
	def := cfg.Profiles[daemon.DefaultProfile]
	defer func() { cfg.Profiles[daemon.DefaultProfile] = def }()
	var err error
	switch name {
	case "socket":
		cfg.Socket = f.socket
	case "state-dir":
		cfg.StateDir = f.stateDir
	case "isolation":
		cfg.Isolation, err = kernel.ParseIsolationMode(f.isolation)
	case "cgroup-parent":
		cfg.Cgroup.Parent = f.cgroupParent
	case "log-level":
		cfg.LogLevel = f.logLevel
	case "log-json":
		cfg.LogJSON = f.logJSON
	case "interpreter":
		cfg.Interpreter = f.interpreter
	case "passthrough":
		cfg.Env.Passthrough = append(cfg.Env.Passthrough, splitList(f.passthrough)...)
	case "memory-max":
		def.MemoryMax, err = daemon.ParseSize(f.memoryMax)
	case "pids-max":
		def.PidsMax, err = strconv.ParseInt(f.pidsMax, 10, 64)
	case "cpu-max":
		def.CPUMax, err = strconv.ParseFloat(f.cpuMax, 64)
	case "max-kernels":
		cfg.MaxKernels, err = strconv.Atoi(f.maxKernels)
	case "max-tool-calls":
		cfg.MaxToolCalls, err = strconv.Atoi(f.maxToolCls)
	case "idle-timeout":
		cfg.IdleTimeout, err = daemon.ParseDuration(f.idleTimeout)
	case "cell-timeout":
		cfg.CellTimeout, err = daemon.ParseDuration(f.cellTimeout)
	case "max-cell-timeout":
		cfg.MaxCellTimeout, err = daemon.ParseDuration(f.maxCellTimeout)
	case "tool-call-timeout":
		cfg.ToolCallTimeout, err = daemon.ParseDuration(f.toolCallTimeout)
	case "metrics-listen":
		cfg.MetricsListen = f.metricsListen
	case "socket-group":
		cfg.SocketGroup = f.socketGroup
	case "drain-grace":
		cfg.DrainGrace, err = daemon.ParseDuration(f.drainGrace)
	case "timeout-action":
		def.TimeoutAction = f.timeoutAction
	case "interrupt-grace":
		def.InterruptGrace, err = daemon.ParseDuration(f.interruptGrace)
	}
	return err
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
