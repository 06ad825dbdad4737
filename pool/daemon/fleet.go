package daemon

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// fleetPasswordEnv holds the registry's password, kept out of config files.
const fleetPasswordEnv = "KERNPOOL_FLEET_REDIS_PASSWORD"

// nodeFleet is a node's membership in a fleet (fleet_redis set).
type nodeFleet struct {
	reg    *redisreg.Registry
	name   string
	placed *fleet.PlacementCache
	beat   *fleet.Heartbeat // nil until ServeNetwork
	marks  *fleet.SaveMarks // nil until ownerSaving
	// markReg is what the marks are written through: reg, or a test's
	// wrapper of it (options.wrapMarks).
	markReg fleet.Registry
}

// joinFleet opens the fleet's registry for a node: it needs a network
// listener the routers reach (listen, advertise_url).
func joinFleet(ctx context.Context, c *Config) (*nodeFleet, error) {
	f := c.Fleet
	if f.Redis == "" {
		return nil, nil
	}
	if c.Network.Listen == "" || f.AdvertiseURL == "" {
		return nil, fmt.Errorf("%w: fleet_redis needs listen and advertise_url (where routers reach this node)", ErrConfig)
	}
	name := f.NodeName
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("%w: node_name: %v", ErrConfig, err)
		}
	}
	if err := (fleet.Node{Name: name, URL: f.AdvertiseURL}).Validate(); err != nil {
		return nil, fmt.Errorf("%w: node_name, advertise_url: %v", ErrConfig, err)
	}
	reg, err := redisreg.Open(ctx, f.Redis, os.Getenv(fleetPasswordEnv))
	if err != nil {
		return nil, err
	}
	return &nodeFleet{reg: reg, markReg: reg, name: name}, nil
}

// watch starts the node's watch on the owner records its fence checks
// (fleet.PlacementCache); the returned func stops it and closes the
// registry.
func (f *nodeFleet) watch(log hclog.Logger) func() {
	f.placed = fleet.StartPlacementCache(fleet.PlacementCacheConfig{Registry: f.reg, Node: f.name, Logger: log.Named("fleet")})
	return func() {
		f.placed.Stop()
		_ = f.reg.Close()
	}
}

// fleetNode is the registration the heartbeat publishes.
func (d *Daemon) fleetNode() fleet.Node {
	st := d.pool.Stats()
	return fleet.Node{Name: d.fleet.name, URL: d.cfg.Fleet.AdvertiseURL, Draining: d.handler.State() != api.StateReady,
		Max: d.cfg.MaxKernels, Free: max(0, d.cfg.MaxKernels-st.KernelsLive)}
}

// startHeartbeat publishes the node once its listener serves.
func (d *Daemon) startHeartbeat() {
	if d.fleet == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fleet.beat == nil && !d.shutdown {
		d.fleet.beat = fleet.StartHeartbeat(fleet.HeartbeatConfig{Registry: d.fleet.reg, Node: d.fleetNode,
			Interval: d.cfg.Fleet.Heartbeat, Logger: d.log.Named("fleet")})
	}
}

// fleetDraining publishes the drain at once (routers move the owners).
func (d *Daemon) fleetDraining() {
	if b := d.fleetBeat(); b != nil {
		b.Kick()
	}
}

// fleetBeat is the node's heartbeat, nil outside a fleet or before it
// started.
func (d *Daemon) fleetBeat() *fleet.Heartbeat {
	if d.fleet == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fleet.beat
}

// leaveFleet withdraws the node and closes the registry.
func (d *Daemon) leaveFleet(ctx context.Context) {
	if d.fleet == nil {
		return
	}
	if d.fleet.marks != nil {
		d.fleet.marks.Wait() // the pool closed: every owner is saved and marked
	}
	if b := d.fleetBeat(); b != nil {
		// A drain past its grace has its ctx ended: the withdrawal
		// still gets a few seconds (else the key expires on its own).
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		b.Stop(wctx)
	}
	d.fleet.placed.Stop()
	_ = d.fleet.reg.Close()
}

// placement reads owners' records for the node's fence, from the cache
// its watch keeps (api.ServerConfig.Placement); nil outside a fleet.
func (f *nodeFleet) placement() func(context.Context, string) (uint64, bool, error) {
	if f == nil {
		return nil
	}
	return f.placed.Read
}

// saveMarks marks the records of the owners a drain still saves, and
// saved (api.ServerConfig.OwnerSaving and OwnerSaved, fleet.SaveMarks);
// nil outside a fleet.
func (f *nodeFleet) saveMarks(p *pool.Pool, log hclog.Logger) (saving, saved func(context.Context, string) error) {
	if f == nil {
		return nil, nil
	}
	f.marks = fleet.NewSaveMarks(f.markReg, f.name, p.WaitOwnerSaved, log.Named("fleet"))
	return f.marks.Saving, f.marks.Saved
}
