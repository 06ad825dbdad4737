package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool/daemon"
)

func serveCommand() command {
	return command{name: "serve", summary: "run the daemon on a Unix socket", setup: serveSetup,
		long: "Serve runs the daemon: a sandboxed pool of kernels behind the HTTP API on a Unix\n" +
			"socket. Settings come from the built-in defaults (shown below), then the config\n" +
			"file (docs/config.md), then the flags given. SIGTERM or SIGINT drains it (a second\n" +
			"signal ends the grace), SIGHUP reloads limits, quotas and the network credentials.\n" +
			"With --listen (config listen) it also serves the API on TCP, over TLS beyond\n" +
			"loopback, to token or client-certificate holders (docs/fleet.md). kernpool drain,\n" +
			"POST /v1/drain, or SIGTERM with drain_on_term = true drain the node: cells are\n" +
			"refused (code draining), persist kernels saved, then it exits. Exit 1: it stopped\n" +
			"with an error (e.g. the configured isolation is not available here, or a drain\n" +
			"left a persist kernel unsaved); 2: usage."}
}

func serveSetup(fs *pflag.FlagSet) runFunc {
	sf := addServeFlags(fs)
	return func(ctx context.Context, e *env, args []string) int {
		if len(args) > 0 {
			return usageError(e, "serve", "unexpected argument %q", args[0])
		}
		reload := func() (*daemon.Config, error) { return loadServeConfig(sf, e.getenv) }
		cfg, err := reload()
		if err != nil {
			return usageError(e, "serve", "%v", err)
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
}

func newLogger(cfg *daemon.Config, e *env) hclog.Logger {
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
	reload func() (*daemon.Config, error)
	// getenv reads the environment.
	getenv func(string) string
}

// serve runs the daemon (package pool/daemon) until ctx ends or
// SIGTERM/SIGINT arrives, then drains: new cells are refused, running
// cells get DrainGrace to finish, every kernel is torn down, the socket
// removed. A second signal skips what is left of the grace. SIGHUP
// reloads limits and quotas. systemd hears READY, RELOADING, STOPPING.
func serve(ctx context.Context, cfg *daemon.Config, log hclog.Logger, hooks daemonHooks) error {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	hup := make(chan os.Signal, 1)
	notifyHangup(hup)
	defer signal.Stop(hup)

	v := buildVersion()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(log), daemon.WithVersion(v.Version, v.Revision))
	if err != nil {
		return err
	}
	ln, err := d.Listen()
	if err != nil {
		_ = d.Shutdown(context.Background())
		return err
	}
	served := make(chan error, 2)
	if cfg.Network.Listen != "" {
		nln, err := d.ListenNetwork()
		if err != nil {
			_ = ln.Close()
			_ = d.Shutdown(context.Background())
			return err
		}
		go func() { served <- d.ServeNetwork(nln) }()
		log.Info("kernpool serving on the network", "listen", nln.Addr().String(), "tls", cfg.Network.TLSCert != "",
			"client_certs", cfg.Network.TLSClientCA != "", "tokens", len(cfg.Network.Tokens))
	}
	go func() { served <- d.Serve(ln) }()
	log.Info("kernpool serving", "socket", cfg.Socket, "state_dir", cfg.StateDir,
		"isolation", d.Isolation(), "version", v.Version, "revision", v.Revision, "pid", os.Getpid())
	sdNotify(hooks.getenv, log, "READY=1")

	serveErr := waitForStop(ctx, cfg, log, signals, hup, served, d, hooks)
	sdNotify(hooks.getenv, log, "STOPPING=1")
	// Shutdown closes the listener, which unlinks the socket (once, by
	// Go's UnixListener); no os.Remove by path here, which could delete
	// the socket of a daemon started since.
	drain(d, cfg.DrainGrace, log, signals)
	if serveErr == nil {
		serveErr = <-served
	}
	if serveErr == nil {
		serveErr = d.DrainError() // a drain that lost a persist kernel exits 1
	}
	log.Info("kernpool stopped")
	return serveErr
}

// waitForStop serves SIGHUP reloads until a stop signal, ctx's end or a
// server failure (returned).
func waitForStop(ctx context.Context, cfg *daemon.Config, log hclog.Logger, signals, hup <-chan os.Signal, served <-chan error, d *daemon.Daemon, hooks daemonHooks) error {
	grace := cfg.DrainGrace.String()
	for {
		select {
		case <-hup:
			reload(d, log, hooks)
		case sig := <-signals:
			if sig == syscall.SIGTERM && d.Config().DrainOnTerm {
				log.Info("SIGTERM received; draining the node (drain_on_term)", "grace", grace)
				d.Drain()
				return nil
			}
			log.Info("signal received; draining", "signal", sig.String(), "grace", grace)
			return nil
		case <-d.DrainRequested():
			log.Info("drain requested; draining the node", "grace", grace)
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

// reload rereads the configuration and applies it (Daemon.Reload); a
// configuration that does not load or apply is refused whole and the
// log says why.
func reload(d *daemon.Daemon, log hclog.Logger, hooks daemonHooks) {
	if hooks.reload == nil {
		return
	}
	sdNotify(hooks.getenv, log, "RELOADING=1")
	defer sdNotify(hooks.getenv, log, "READY=1")
	next, err := hooks.reload()
	if err == nil {
		err = d.Reload(next)
	}
	if err != nil {
		log.Error("reload refused; keeping the running configuration", "error", err)
	}
}

// drain shuts the daemon down within grace; a second signal ends the
// grace at once.
func drain(d *daemon.Daemon, grace time.Duration, log hclog.Logger, signals <-chan os.Signal) {
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
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
	_ = d.Shutdown(graceCtx) // logs what it had to kill
	cancel()
	<-forced
}
