package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/fleet"
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

// Daemon is a ready, sandboxed pool behind its HTTP API: what
// `kernpool serve` runs, for a Go program to embed. New builds it (fail
// closed), Serve serves the API on a listener, Shutdown drains it.
type Daemon struct {
	cfg     *Config
	log     hclog.Logger
	version string
	pool    *pool.Pool
	handler *api.Server
	seams   seams
	kit     *opsKit
	unlock  func()
	rl      *reloader
	net     *netAuth   // nil without a network listener
	fleet   *nodeFleet // nil outside a fleet (fleet_redis)

	drainOnce sync.Once
	drainReq  chan struct{} // closed by Drain

	mu       sync.Mutex
	srv      *http.Server // nil until Serve
	netSrv   *http.Server // nil until ServeNetwork
	shutdown bool
	done     chan struct{} // closed when Shutdown finished
}

// Option adjusts New.
type Option func(*options)

type options struct {
	log               hclog.Logger
	version, revision string
	// wrapMarks, when set, wraps the registry a fleet node writes its
	// drain's save marks through: the tests' fault injection around the
	// real registry (export_test.go), to see Shutdown's order.
	wrapMarks func(fleet.Registry) fleet.Registry
}

// WithLogger sends the daemon's logs to log (default: an hclog logger on
// stderr at cfg.LogLevel, JSON when cfg.LogJSON).
func WithLogger(log hclog.Logger) Option { return func(o *options) { o.log = log } }

// WithVersion sets the version and VCS revision /v1/health and the
// metrics report (default "embedded", "unknown").
func WithVersion(version, revision string) Option {
	return func(o *options) { o.version, o.revision = version, revision }
}

// New builds a ready daemon from cfg: it completes cfg's empty paths
// (Config.Complete), resolves the default interpreter, creates and locks
// the state dir, makes the process non-dumpable, wires the isolation,
// environment, output and tool-RPC packages into a pool and checks that
// kernels can run. It fails closed: when any protection the config asks
// for cannot be applied, New returns an error and nothing serves (unless
// cfg.Isolation is "process", the explicit degraded mode).
//
// The program embedding the daemon must call kinit.Main() first thing in
// main: the kernel init step is the running binary re-executed
// (docs/design.md, "The sandbox"). The caller owns cfg no more: New keeps
// a completed copy.
func New(ctx context.Context, cfg *Config, opts ...Option) (d *Daemon, err error) {
	o := options{version: "embedded", revision: "unknown"}
	for _, opt := range opts {
		opt(&o)
	}
	c := *cfg
	if err := c.Complete(os.Getenv); err != nil {
		return nil, err
	}
	log := o.log
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "kernpool", Level: hclog.LevelFromString(c.LogLevel), JSONFormat: c.LogJSON, Output: os.Stderr})
	}
	d = &Daemon{cfg: &c, log: log, version: o.version, done: make(chan struct{}), drainReq: make(chan struct{})}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	interp, err := resolveInterpreter(ctx, c.Interpreter, log)
	if err != nil {
		return nil, err
	}
	if err := prepareDirs(&c, log); err != nil {
		return nil, err
	}
	// The state lock comes first: a second daemon on this state dir must be
	// refused before its isolation setup sweeps "leftovers" that are the
	// live kernels of the first. Daemons with other state dirs have other
	// cgroup parents, and a parent another live daemon holds is refused.
	if d.unlock, err = lockStateDir(c.StateDir); err != nil {
		return nil, err
	}
	undo = append(undo, d.unlock)
	// Fail closed: everything the config asks for is in place (or the
	// isolation mode explicitly accepts less) before anyone can connect.
	if err := hardenDaemon(); err != nil {
		return nil, fmt.Errorf("make the daemon non-dumpable: %w", err)
	}
	if d.seams, err = buildSeams(&c, log); err != nil {
		return nil, fmt.Errorf("wire isolation: %w", err)
	}
	undo = append(undo, d.closeSeams)
	if interp, err = checkKernelAccess(ctx, d.seams, interp, &c, log); err != nil {
		return nil, err
	}
	if c.Network.Listen != "" {
		if d.net, err = loadNetAuth(&c.Network); err != nil {
			return nil, err
		}
	}
	if d.fleet, err = joinFleet(ctx, &c); err != nil {
		return nil, err
	}
	if d.fleet != nil {
		undo = append(undo, d.fleet.watch(log))
		if o.wrapMarks != nil {
			d.fleet.markReg = o.wrapMarks(d.fleet.markReg)
		}
	}
	if d.kit, err = newOpsKit(&c, o.version, o.revision, log); err != nil {
		return nil, err
	}
	kit := d.kit // the deferred undo runs after d is set to nil
	undo = append(undo, func() { kit.close(context.Background()) })
	if st, ok := d.seams.Sandboxes.(pool.SandboxStatser); ok {
		kit.metrics.WatchSandboxes(st.SandboxStats)
	}
	pc := poolConfig(&c, interp, d.seams, log)
	pc.Observer, pc.Quotas = d.kit.observer, quotas(&c)
	if pc.Checkpoints.Store, err = openStore(ctx, &c, log); err != nil {
		return nil, err
	}
	if d.pool, err = pool.New(pc); err != nil {
		return nil, fmt.Errorf("start pool: %w", err)
	}
	d.handler = d.newHandler(&c, o.version, interp)
	d.rl = &reloader{cur: &c, pool: d.pool, seams: d.seams, net: d.net, log: log}
	return d, nil
}

// newHandler is the node API over d's pool, seams, ops kit and fleet.
func (d *Daemon) newHandler(c *Config, version, interp string) *api.Server {
	saving, saved := d.fleet.saveMarks(d.pool, d.log)
	return api.NewServer(d.pool, api.ServerConfig{
		Version: version, Isolation: d.seams.Isolation, ToolCallTimeout: c.ToolCallTimeout, Logger: d.log,
		CheckAccess: requestChecker(d.seams, interp), Metrics: d.kit.metrics.Handler(),
		OnDrain: d.requestDrain, MaxKernels: c.MaxKernels,
		Settings:  func() *api.Settings { return SettingsOf(d.rl.current(), interp) },
		Placement: d.fleet.placement(), OwnerSaving: saving, OwnerSaved: saved,
	})
}

func (d *Daemon) closeSeams() {
	if err := d.seams.Close(); err != nil {
		d.log.Error("releasing isolation failed", "error", err)
	}
}

// Config is the completed configuration the daemon runs with (after
// Reload: the applied one). Do not modify it.
func (d *Daemon) Config() *Config { return d.rl.current() }

// Pool is the daemon's pool, for a program that calls it directly.
func (d *Daemon) Pool() *pool.Pool { return d.pool }

// Handler is the HTTP API (docs/api.md), for a program that serves it
// itself; Serve is the usual way.
func (d *Daemon) Handler() http.Handler { return d.handler }

// Isolation is the one-line description of the kernels' confinement
// that /v1/health reports.
func (d *Daemon) Isolation() string { return d.seams.Isolation }

// Listen opens the configured API socket (cfg.Socket: mode 0660, in a
// private dir, a stale socket replaced, a live one refused) and gives it
// to cfg.SocketGroup when set.
func (d *Daemon) Listen() (net.Listener, error) {
	ln, err := api.Listen(d.cfg.Socket, d.log)
	if err != nil {
		return nil, err
	}
	if err := chgrpSocket(d.cfg.Socket, d.cfg.SocketGroup); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve serves the API on ln (at most api.DefaultMaxConns connections at
// once) and, when cfg.MetricsListen is set, the metrics on TCP, until
// Shutdown. It returns nil after Shutdown, else why serving failed. It
// closes ln; Shutdown closing a Unix listener removes its socket.
func (d *Daemon) Serve(ln net.Listener) error {
	d.mu.Lock()
	if d.shutdown || d.srv != nil {
		d.mu.Unlock()
		_ = ln.Close()
		return errors.New("serve: the daemon is shut down or already serving")
	}
	d.srv = newHTTPServer(d.handler, d.log)
	srv := d.srv
	d.mu.Unlock()
	d.kit.serveScrape(d.log)
	err := srv.Serve(api.LimitConns(ln, api.DefaultMaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown drains the daemon: new cells are refused, running ones may
// finish until ctx ends (then they are killed), every kernel is torn
// down, HTTP stops (tool-call answers are accepted while cells drain),
// the audit log is flushed and the isolation and state-dir lock are
// released. A second call waits for the first.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if d.shutdown {
		d.mu.Unlock()
		<-d.done
		return nil
	}
	d.shutdown = true
	srvs := []*http.Server{d.srv, d.netSrv}
	d.mu.Unlock()
	defer close(d.done)
	d.handler.SetDraining()
	d.fleetDraining()
	stopProgress := d.logDrainProgress()
	var err error
	if perr := d.pool.Close(d.interruptPastGrace(ctx)); perr != nil {
		d.log.Warn("pool closed with cells still running; they were killed", "error", perr)
		err = perr
	}
	stopProgress()
	d.leaveFleet(ctx)
	if st := d.handler.EndDrain(); st.State == api.StateDrained {
		d.log.Info("drain finished", "saved", st.Saved, "failed", st.Failed, "kernels_to_save", st.KernelsToSave)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, srv := range srvs {
		if srv == nil {
			continue
		}
		if serr := srv.Shutdown(shutCtx); serr != nil {
			d.log.Warn("HTTP shutdown timed out; closing connections", "error", serr)
			_ = srv.Close()
		}
	}
	d.kit.close(context.Background()) // after drain: the last cells are audited
	d.closeSeams()
	d.unlock()
	return err
}

// Reload applies a reread configuration: profile limits (for kernels
// started from now on; running kernels keep their cgroup limits), cell
// policies (timeout_action, interrupt_grace, persist: for cells and
// teardowns from now on), spares and preload, and the per-owner quotas.
// A configuration whose changes cannot be applied is refused whole (the
// error says why) and the running one stays; other changed settings are
// logged as needing a restart.
func (d *Daemon) Reload(next *Config) error {
	c := *next
	if err := c.Complete(os.Getenv); err != nil {
		return err
	}
	return d.rl.apply(&c)
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
	if cfg.Users.PerOwner && cfg.Profiles[DefaultProfile].Spares > 0 {
		log.Info("no warm spares: users.per_owner shares one uid per owner, which a kernel started before its owner is known cannot have")
	}
	return pool.Config{
		StateDir: cfg.StateDir, DefaultInterpreter: interp, Modes: cfg.Modes(),
		IdleTimeout: cfg.IdleTimeout, CellTimeout: cfg.CellTimeout, MaxCellTimeout: cfg.MaxCellTimeout,
		MaxKernels: cfg.MaxKernels, MaxToolCalls: cfg.MaxToolCalls,
		Ceiling:   pool.Limits{MemoryMax: cfg.Ceiling.MemoryMax, PidsMax: cfg.Ceiling.PidsMax, CPUMax: cfg.Ceiling.CPUMax},
		Sandboxes: sm.Sandboxes, Env: sm.Env, Output: sm.Output, Tools: sm.Tools, Logger: log,
		Policies: cfg.Policies(), Warm: cfg.Warm(), Checkpoints: poolCheckpoints(cfg.Checkpoints),
		Sessions: cfg.Sessions,
	}
}

// poolCheckpoints maps checkpoint_idle = 0 (off) onto the pool's -1.
func poolCheckpoints(c pool.CheckpointConfig) pool.CheckpointConfig {
	if c.Idle == 0 {
		c.Idle = -1
	}
	return c
}

func newHTTPServer(h http.Handler, log hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleConnTimeout,
		ErrorLog:          log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}

// prepareDirs creates the state dir (0711: kernel uids traverse it to
// their own 0700 staging dirs) and the socket's dir. The socket dir is
// 0750, or 0711 when the state dir lies inside it (the default layout),
// since kernels must traverse it too; the socket itself is always 0660.
// A socket dir kernpool made earlier with a mode kernels cannot traverse
// (a daemon or test run creating /run/kernpool/uids first made it 0700)
// gets its mode fixed; any other dir is left alone, and the access check
// then names the chmod to run. An existing state dir must be a directory
// of the daemon's own uid.
func prepareDirs(cfg *Config, log hclog.Logger) error {
	sockDir := filepath.Dir(cfg.Socket)
	mode := os.FileMode(api.SocketDirMode)
	if within(cfg.StateDir, sockDir) {
		mode = stateDirMode
	}
	if _, err := os.Stat(sockDir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(sockDir, mode); err != nil {
			return fmt.Errorf("create socket dir: %w", err)
		}
		if err := os.Chmod(sockDir, mode); err != nil {
			return fmt.Errorf("chmod socket dir: %w", err)
		}
	} else if mode == stateDirMode {
		if err := fixOwnDirMode(sockDir, filepath.Base(cfg.StateDir), log); err != nil {
			return err
		}
	}
	fi, err := os.Lstat(cfg.StateDir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(cfg.StateDir, stateDirMode); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		if err := os.Chmod(cfg.StateDir, stateDirMode); err != nil {
			return fmt.Errorf("chmod state dir: %w", err)
		}
		log.Debug("created state dir", "path", cfg.StateDir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() || !ownedByUs(fi) {
		return fmt.Errorf("%w: state dir %s is not a directory of this daemon's user (a symlink, or someone else's): choose another --state-dir or remove it", ErrConfig, cfg.StateDir)
	}
	return nil
}

// fixOwnDirMode gives dir search permission for everyone (0711) when it
// lacks it and is kernpool's own: owned by the daemon's uid and holding
// nothing but what kernpool puts there (the socket, the state dir, the
// uid lock dir).
func fixOwnDirMode(dir, stateName string, log hclog.Logger) error {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o001 != 0 || !ownedByUs(fi) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if n := e.Name(); n != stateName && n != "uids" && !strings.HasPrefix(n, "kernpool.sock") {
			return nil // not only ours: the access check explains the fix
		}
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o011); err != nil {
		return fmt.Errorf("chmod socket dir: %w", err)
	}
	log.Info("socket dir made searchable so kernels reach their staging dirs", "path", dir,
		"old_mode", fmt.Sprintf("%04o", fi.Mode().Perm()), "new_mode", fmt.Sprintf("%04o", fi.Mode().Perm()|0o011))
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
