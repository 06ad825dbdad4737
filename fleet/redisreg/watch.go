package redisreg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kernpool/kernpool/fleet"
)

var _ fleet.OwnerWatcher = (*Registry)(nil)

// watchMissed is how many intervals a watch waits for any message (a
// pong at least) before it takes the connection for lost.
const watchMissed = 5

func (r *Registry) watchChannel() string { return r.prefix + "owners" }

// WatchOwners subscribes to the channel the Place and Forget scripts
// publish each changed owner on, in the same atomic step as the change.
// Redis answers a PING on the subscribed connection after every message
// published before it, so a pong confirms every change committed before
// its ping was sent has been delivered: that is Synced. Any error ends
// the subscription (messages published meanwhile are lost): Lost, then
// a new subscription.
func (r *Registry) WatchOwners(ctx context.Context, interval time.Duration, ev fleet.OwnerEvents) {
	for ctx.Err() == nil {
		err := r.watchOnce(ctx, interval, ev)
		ev.Lost(err)
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// watchOnce runs one subscription until it fails or ctx ends.
func (r *Registry) watchOnce(ctx context.Context, interval time.Duration, ev fleet.OwnerEvents) error {
	ps := r.rdb.Subscribe(ctx, r.watchChannel())
	defer ps.Close()
	if _, err := ps.ReceiveTimeout(ctx, watchMissed*interval); err != nil { // the subscription's confirmation
		return fmt.Errorf("%w: watch owners: %v", fleet.ErrRegistry, err)
	}
	// Pings carry their send time, as the monotonic time since start.
	start := time.Now()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if ps.Ping(pctx, strconv.FormatInt(int64(time.Since(start)), 10)) != nil {
				return // the receive loop sees the broken connection
			}
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stop(); <-pinged }()
	for {
		msg, err := ps.ReceiveTimeout(ctx, watchMissed*interval)
		if err != nil {
			return fmt.Errorf("%w: watch owners: %v", fleet.ErrRegistry, err)
		}
		switch m := msg.(type) {
		case *redis.Message:
			ev.Changed(m.Payload)
		case *redis.Pong:
			d, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil || d < 0 || time.Duration(d) > time.Since(start) {
				return fmt.Errorf("%w: watch owners: a pong not of this watch: %q", fleet.ErrRegistry, m.Payload)
			}
			ev.Synced(start.Add(time.Duration(d)))
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				return fmt.Errorf("%w: watch owners: %s", fleet.ErrRegistry, m.Kind)
			}
		default:
			return fmt.Errorf("%w: watch owners: %w", fleet.ErrRegistry, errors.ErrUnsupported)
		}
	}
}
