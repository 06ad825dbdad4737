package main

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool/daemon"
)

// runRouter serves until ctx ends (SIGTERM, SIGINT), rereading the
// credentials on SIGHUP.
func runRouter(ctx context.Context, cfg *daemon.Config, load func() (*daemon.Config, error), log hclog.Logger) error {
	r, err := daemon.NewRouter(ctx, cfg, buildVersion().Version, log)
	if err != nil {
		return err
	}
	ln, err := r.Listen()
	if err != nil {
		_ = r.Shutdown(ctx)
		return err
	}
	log.Info("router serving", "listen", ln.Addr().String(), "fleet_redis_configured", cfg.Fleet.Redis != "")
	served := make(chan error, 1)
	go func() { served <- r.Serve(ln) }()
	hup := make(chan os.Signal, 1)
	notifyHangup(hup)
	for {
		select {
		case err := <-served:
			_ = r.Shutdown(context.Background())
			return err
		case <-hup:
			next, err := load()
			if err == nil {
				err = r.Reload(next)
			}
			if err != nil {
				log.Error("reload refused; the running credentials stay", "error", err)
			} else {
				log.Info("credentials reloaded")
			}
		case <-ctx.Done():
			log.Info("router stopping")
			sctx, cancel := context.WithTimeout(context.Background(), routerShutdownGrace)
			defer cancel()
			err := r.Shutdown(sctx)
			<-served
			return err
		}
	}
}
