package fleet

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultHeartbeat is how often a node publishes itself; its
// registration lives three heartbeats, so a node is taken for gone
// about three heartbeats after it stopped.
const DefaultHeartbeat = time.Second

// heartbeatTTLs is the registration's life in heartbeats.
const heartbeatTTLs = 3

// HeartbeatConfig configures a node's heartbeat.
type HeartbeatConfig struct {
	Registry Registry
	// Node returns the registration to publish (called at each beat).
	Node func() Node
	// Interval between beats (DefaultHeartbeat).
	Interval time.Duration
	Logger   hclog.Logger
}

// Heartbeat publishes a node until Stop.
type Heartbeat struct {
	cfg  HeartbeatConfig
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartHeartbeat publishes cfg.Node() at once and then every Interval.
func StartHeartbeat(cfg HeartbeatConfig) *Heartbeat {
	cfg.Interval = cmp.Or(max(cfg.Interval, 0), DefaultHeartbeat)
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	h := &Heartbeat{cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go h.run()
	return h
}

func (h *Heartbeat) run() {
	defer close(h.done)
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	failing := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Interval)
		err := h.cfg.Registry.Publish(ctx, h.cfg.Node(), heartbeatTTLs*h.cfg.Interval)
		cancel()
		switch {
		case err != nil && !failing:
			h.cfg.Logger.Error("fleet heartbeat failed: routers will take this node for gone", "error", err)
		case err == nil && failing:
			h.cfg.Logger.Info("fleet heartbeat published again")
		}
		failing = err != nil
		select {
		case <-h.stop:
			return
		case <-h.kick:
		case <-t.C:
		}
	}
}

// Kick publishes at once (the node's state changed: a drain began).
func (h *Heartbeat) Kick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Stop ends the beats and withdraws the node's registration.
func (h *Heartbeat) Stop(ctx context.Context) {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		if err := h.cfg.Registry.Withdraw(ctx, h.cfg.Node().Name); err != nil {
			h.cfg.Logger.Warn("fleet registration not withdrawn (it expires)", "error", err)
		}
	})
}
