package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool/daemon"
)

// routerShutdownGrace bounds how long requests in flight (streams) may
// finish once the router is told to stop.
const routerShutdownGrace = 30 * time.Second

func routerCommand() command {
	return command{name: "router", summary: "run a fleet router: the node API in front of many nodes", setup: routerFlags,
		long: "Router serves the API of a node (docs/api.md) in front of a fleet of nodes\n" +
			"(docs/fleet.md). It keeps no state: owner records and node heartbeats live in\n" +
			"Redis (fleet_redis), so any number of routers may run. Each owner's requests go to\n" +
			"the node its record names; a new owner is placed on a live, non-draining node by\n" +
			"rendezvous hashing weighted by free capacity; an owner whose node is gone or\n" +
			"draining is placed again, and its next cell restores from the checkpoint store.\n" +
			"It reads the config file a node reads: listen, tls_*, the token and client_cert\n" +
			"blocks and listen_* bounds as a node uses them, and fleet_redis, fleet_node_ca,\n" +
			"fleet_node_token_file. SIGTERM or SIGINT stops it (streams in flight get 30s);\n" +
			"SIGHUP rereads the credentials. Exit 1: it stopped with an error; 2: usage."}
}

func routerFlags(fs *pflag.FlagSet) runFunc {
	file := fs.String("config", "", "config `file` (HCL; default "+daemon.DefaultConfigFile+" when it exists)")
	listen := fs.String("listen", "", "serve on this TCP `address` (overrides listen)")
	redis := fs.String("fleet-redis", "", "the fleet registry's Redis `URL` (overrides fleet_redis)")
	return func(ctx context.Context, e *env, args []string) int {
		if len(args) > 0 {
			return usageError(e, "router", "unexpected argument %q", args[0])
		}
		load := func() (*daemon.Config, error) {
			cfg := daemon.DefaultConfig()
			path := *file
			if path == "" && runtime.GOOS != "windows" {
				if _, err := os.Stat(daemon.DefaultConfigFile); err == nil {
					path = daemon.DefaultConfigFile
				}
			}
			if path != "" {
				var err error
				if cfg, err = daemon.LoadConfigFile(path); err != nil {
					return nil, err
				}
				cfg.File = path
			}
			if fs.Changed("listen") {
				cfg.Network.Listen = *listen
			}
			if fs.Changed("fleet-redis") {
				cfg.Fleet.Redis = *redis
			}
			if cfg.Network.Listen == "" || cfg.Fleet.Redis == "" {
				return nil, fmt.Errorf("%w: a router needs listen and fleet_redis (config file, --listen, --fleet-redis)", daemon.ErrConfig)
			}
			return cfg, cfg.Validate()
		}
		cfg, err := load()
		if err != nil {
			return usageError(e, "router", "%v", err)
		}
		log := newLogger(cfg, e).Named("router")
		if err := runRouter(ctx, cfg, load, log); err != nil {
			fmt.Fprintf(e.stderr, "kernpool router: %v\n", err)
			return exitCellErr
		}
		return exitOK
	}
}
