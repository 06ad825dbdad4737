package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

const (
	// readHeaderTimeout bounds a client's request headers (slowloris).
	readHeaderTimeout = 10 * time.Second
	// idleConnTimeout closes kept-alive client connections left idle.
	idleConnTimeout = 2 * time.Minute
	// shutdownTimeout bounds the HTTP server's own shutdown after the pool
	// closed (handlers have their answers by then).
	shutdownTimeout = 5 * time.Second
	// stateDirMode lets kernel uids traverse to their own staging dirs.
	stateDirMode = 0o711
)

const serveSynopsis = "[--socket PATH] [--config FILE] [--state-dir DIR] [--isolation sandbox|process] [--cgroup-parent NAME] [--memory-max SIZE] [--pids-max N] [--cpu-max CORES] [--passthrough NAME,...] [flags]"

func runServe(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "serve", serveSynopsis)
	sf := addServeFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q", fs.Arg(0))
	}
	reload := func() (*Config, error) { return loadServeConfig(fs, sf, e.getenv) }
	cfg, err := reload()
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	log := newLogger(cfg, e)
	if cfg.File != "" {
		log.Info("configuration read", "file", cfg.File)
	}
	if err := serve(ctx, cfg, log, daemonHooks{reload: reload, getenv: e.getenv}); err != nil {
		log.Error("kernpool stopped with an error", "error", err)
		fmt.Fprintf(e.stderr, "kernpool serve: %v\n", err)
		return exitCellErr
	}
	return exitOK
}

func newLogger(cfg *Config, e *env) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "kernpool",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: cfg.LogJSON,
		Output:     e.stderr,
	})
}

// daemonHooks are serve's ties to its invocation: how to reread the
// configuration (SIGHUP) and the environment (NOTIFY_SOCKET).
type daemonHooks struct {
	// reload rereads the config file and flags; nil: SIGHUP is ignored.
	reload func() (*Config, error)
	// getenv reads the environment.
	getenv func(string) string
}

// serve runs the daemon until ctx ends or SIGTERM/SIGINT arrives, then
// drains: new cells are refused, running cells get DrainGrace to finish,
// every kernel is torn down, the socket removed. A second signal skips
// what is left of the grace. SIGHUP reloads limits and quotas (reload.go).
func serve(ctx context.Context, cfg *Config, log hclog.Logger, hooks daemonHooks) error {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	hup := make(chan os.Signal, 1)
	notifyHangup(hup)
	defer signal.Stop(hup)

	interp, err := resolveInterpreter(ctx, cfg.Interpreter, log)
	if err != nil {
		return err
	}
	if err := prepareDirs(cfg, log); err != nil {
		return err
	}
	// The state lock comes first: a second daemon on this state dir must be
	// refused before its isolation setup sweeps "leftovers" that are the
	// live kernels of the first. Daemons with other state dirs have other
	// cgroup parents, and a parent another live daemon holds is refused.
	unlock, err := lockStateDir(cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	// Fail closed: everything the config asks for is in place (or the
	// isolation mode explicitly accepts less) before anyone can connect.
	if err := hardenDaemon(); err != nil {
		return fmt.Errorf("make the daemon non-dumpable: %w", err)
	}
	sm, err := buildSeams(cfg, log)
	if err != nil {
		return fmt.Errorf("wire isolation: %w", err)
	}
	defer func() {
		if err := sm.Close(); err != nil {
			log.Error("releasing isolation failed", "error", err)
		}
	}()
	if interp, err = checkKernelAccess(ctx, sm, interp, cfg, log); err != nil {
		return err
	}
	kit, err := newOpsKit(cfg, log)
	if err != nil {
		return err
	}
	defer kit.close(context.Background()) // after drain: the last cells are audited
	ln, err := api.Listen(cfg.Socket, log)
	if err != nil {
		return err
	}
	defer ln.Close() // removes the socket after a failed start; idempotent
	if err := chgrpSocket(cfg.Socket, cfg.SocketGroup); err != nil {
		return err
	}
	pc := poolConfig(cfg, interp, sm, log)
	pc.Observer, pc.Quotas = kit.observer, quotas(cfg)
	p, err := pool.New(pc)
	if err != nil {
		return fmt.Errorf("start pool: %w", err)
	}
	v := buildVersion()
	handler := api.NewServer(p, api.ServerConfig{
		Version: v.Version, Isolation: sm.Isolation, ToolCallTimeout: cfg.ToolCallTimeout, Logger: log,
		CheckAccess: requestChecker(sm, interp), Metrics: kit.metrics.Handler(),
	})
	srv := newHTTPServer(handler, log)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(api.LimitConns(ln, api.DefaultMaxConns)) }()
	kit.serveScrape(log)
	log.Info("kernpool serving", "socket", cfg.Socket, "state_dir", cfg.StateDir,
		"isolation", sm.Isolation, "version", v.Version, "revision", v.Revision, "pid", os.Getpid())
	sdNotify(hooks.getenv, log, "READY=1")

	rl := &reloader{cur: cfg, load: hooks.reload, pool: p, seams: sm, log: log, getenv: hooks.getenv}
	serveErr := waitForStop(ctx, cfg, log, signals, hup, served, rl)
	sdNotify(hooks.getenv, log, "STOPPING=1")
	// Shutdown closed the listener, which unlinked the socket (once, by
	// Go's UnixListener); no os.Remove by path here, which could delete
	// the socket of a daemon started since.
	drain(cfg, log, handler, p, srv, signals)
	log.Info("kernpool stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// waitForStop serves SIGHUP reloads until a stop signal, ctx's end or a
// server failure (returned).
func waitForStop(ctx context.Context, cfg *Config, log hclog.Logger, signals, hup <-chan os.Signal, served <-chan error, rl *reloader) error {
	grace := cfg.DrainGrace.String()
	for {
		select {
		case <-hup:
			rl.reload()
		case sig := <-signals:
			log.Info("signal received; draining", "signal", sig.String(), "grace", grace)
			return nil
		case <-ctx.Done():
			log.Info("context done; draining", "grace", grace)
			return nil
		case err := <-served:
			log.Error("server failed; tearing down", "error", err)
			return err
		}
	}
}

// checkKernelAccess refuses to start when a kernel's uid could not run
// the default interpreter or reach its staging dir under the state dir
// (every ancestor needs search permission), rather than failing each
// spawn later with a bare "permission denied". An interpreter found on
// PATH (not configured) may be replaced by the next usable python3.
func checkKernelAccess(ctx context.Context, sm seams, interp string, cfg *Config, log hclog.Logger) (string, error) {
	if sm.Check == nil {
		return interp, nil
	}
	check := func(path string) error { return sm.Check(path, "") }
	interp, err := usableInterpreter(ctx, interp, cfg.Interpreter != "", check, log)
	if err != nil {
		return "", fmt.Errorf("kernels cannot run the default interpreter: %w", err)
	}
	if err := sm.Check(interp, cfg.StateDir); err != nil {
		return "", fmt.Errorf("kernels cannot reach their staging dirs in the state dir (every parent needs o+x): %w", err)
	}
	return interp, nil
}

// requestChecker vets a request's interpreter and cwd as checkKernelAccess
// vetted the defaults; nil when the wiring has no check.
func requestChecker(sm seams, defaultInterp string) func(interp, cwd string) error {
	if sm.Check == nil {
		return nil
	}
	return func(interp, cwd string) error {
		if interp == "" {
			interp = defaultInterp
		}
		return sm.Check(interp, cwd)
	}
}

func poolConfig(cfg *Config, interp string, sm seams, log hclog.Logger) pool.Config {
	return pool.Config{
		StateDir: cfg.StateDir, DefaultInterpreter: interp, Modes: cfg.Modes(),
		IdleTimeout: cfg.IdleTimeout, CellTimeout: cfg.CellTimeout, MaxCellTimeout: cfg.MaxCellTimeout,
		MaxKernels: cfg.MaxKernels, MaxToolCalls: cfg.MaxToolCalls,
		Ceiling:   pool.Limits{MemoryMax: cfg.Ceiling.MemoryMax, PidsMax: cfg.Ceiling.PidsMax, CPUMax: cfg.Ceiling.CPUMax},
		Sandboxes: sm.Sandboxes, Env: sm.Env, Output: sm.Output, Tools: sm.Tools, Logger: log,
		Policies: cfg.Policies(),
	}
}

func newHTTPServer(h http.Handler, log hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleConnTimeout,
		ErrorLog:          log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}

// drain refuses new cells, lets running ones finish within the grace (a
// second signal ends it at once), kills every kernel, then stops HTTP.
// Tool-call answers are still accepted while cells drain.
func drain(cfg *Config, log hclog.Logger, h *api.Server, p *pool.Pool, srv *http.Server, signals <-chan os.Signal) {
	h.SetDraining()
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainGrace)
	defer cancel()
	forced := make(chan struct{})
	go func() {
		defer close(forced)
		select {
		case sig := <-signals:
			log.Warn("second signal; tearing down now", "signal", sig.String())
			cancel()
		case <-graceCtx.Done():
		}
	}()
	if err := p.Close(graceCtx); err != nil {
		log.Warn("pool closed with cells still running; they were killed", "error", err)
	}
	cancel()
	<-forced
	shutCtx, shutCancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer shutCancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("HTTP shutdown timed out; closing connections", "error", err)
		_ = srv.Close()
	}
}

// prepareDirs creates the state dir (0711: kernel uids traverse it to
// their own 0700 staging dirs) and the socket's dir. The socket dir is
// 0750, or 0711 when the state dir lies inside it (the default layout),
// since kernels must traverse it too; the socket itself is always 0660.
func prepareDirs(cfg *Config, log hclog.Logger) error {
	sockDir := filepath.Dir(cfg.Socket)
	if _, err := os.Stat(sockDir); errors.Is(err, os.ErrNotExist) {
		mode := os.FileMode(api.SocketDirMode)
		if within(cfg.StateDir, sockDir) {
			mode = stateDirMode
		}
		if err := os.MkdirAll(sockDir, mode); err != nil {
			return fmt.Errorf("create socket dir: %w", err)
		}
		if err := os.Chmod(sockDir, mode); err != nil {
			return fmt.Errorf("chmod socket dir: %w", err)
		}
	}
	if _, err := os.Stat(cfg.StateDir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(cfg.StateDir, stateDirMode); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		if err := os.Chmod(cfg.StateDir, stateDirMode); err != nil {
			return fmt.Errorf("chmod state dir: %w", err)
		}
		log.Debug("created state dir", "path", cfg.StateDir)
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
