package fleet

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of PlacementCacheConfig's zero fields.
const (
	// DefaultWatchInterval is how often a node confirms its watch on the
	// owner records current.
	DefaultWatchInterval = 100 * time.Millisecond
	// watchLease is, in watch intervals, how stale a node's view of the
	// records may be while it still answers from its cache: past it
	// (Redis unreachable, the watch stalled) every check reads Redis.
	watchLease = 5
	// maxCachedRecords bounds the records a node caches; past it the
	// cache is emptied (a miss only costs a read).
	maxCachedRecords = 1 << 16
)

// PlacementCacheConfig configures a PlacementCache.
type PlacementCacheConfig struct {
	Registry Registry
	// Node is this node's name.
	Node string
	// Interval is the watch's confirmation period (DefaultWatchInterval).
	Interval time.Duration
	Logger   hclog.Logger
}

// PlacementCache is a node's view of the owner records it checks each
// fenced request against (api.ServerConfig.Placement): a record read
// from the registry is kept while the node's watch on the records is
// live (confirmed within watchLease intervals) and dropped when the
// watch reports its owner changed or the watch breaks. So once an owner
// is placed elsewhere, this node refuses its old generation as soon as
// the change reaches it, at the latest watchLease intervals later,
// whatever any router still holds; and a warm request costs no read.
type PlacementCache struct {
	cfg   PlacementCacheConfig
	lease time.Duration

	mu       sync.Mutex
	recs     map[string]cachedRecord
	seq      uint64    // bumped by every change and loss: a read begun before one is not kept
	syncedAt time.Time // the watch's last confirmation (zero: not live)

	stop context.CancelFunc
	done chan struct{}
}

type cachedRecord struct {
	gen  uint64
	here bool
}

// StartPlacementCache starts the watch when the registry is an
// OwnerWatcher; otherwise every Read reads the registry.
func StartPlacementCache(cfg PlacementCacheConfig) *PlacementCache {
	cfg.Interval = cmp.Or(max(cfg.Interval, 0), DefaultWatchInterval)
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	c := &PlacementCache{cfg: cfg, lease: watchLease * cfg.Interval, recs: map[string]cachedRecord{}, done: make(chan struct{})}
	w, ok := cfg.Registry.(OwnerWatcher)
	if !ok {
		close(c.done)
		c.stop = func() {}
		return c
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go func() {
		defer close(c.done)
		w.WatchOwners(ctx, cfg.Interval, OwnerEvents{Changed: c.changed, Synced: c.synced, Lost: c.lost})
	}()
	return c
}

// Stop ends the watch.
func (c *PlacementCache) Stop() {
	c.stop()
	<-c.done
}

// Read returns owner's record as this node checks it: its generation
// and whether it names this node (no record: 0, false).
func (c *PlacementCache) Read(ctx context.Context, owner string) (uint64, bool, error) {
	c.mu.Lock()
	if r, ok := c.recs[owner]; ok && c.liveLocked() {
		c.mu.Unlock()
		return r.gen, r.here, nil
	}
	seq := c.seq
	c.mu.Unlock()
	p, ok, err := c.cfg.Registry.Owner(ctx, owner)
	if err != nil {
		return 0, false, err
	}
	r := cachedRecord{}
	if ok {
		r = cachedRecord{gen: p.Generation, here: p.Node == c.cfg.Node}
	}
	c.mu.Lock()
	// A change or loss during the read may have come before or after
	// it: the record read is not kept.
	if c.seq == seq && c.liveLocked() {
		if len(c.recs) >= maxCachedRecords {
			clear(c.recs)
		}
		c.recs[owner] = r
	}
	c.mu.Unlock()
	return r.gen, r.here, nil
}

func (c *PlacementCache) liveLocked() bool {
	return !c.syncedAt.IsZero() && time.Since(c.syncedAt) < c.lease
}

func (c *PlacementCache) changed(owner string) {
	c.mu.Lock()
	delete(c.recs, owner)
	c.seq++
	c.mu.Unlock()
}

func (c *PlacementCache) synced(asOf time.Time) {
	c.mu.Lock()
	if asOf.After(c.syncedAt) {
		c.syncedAt = asOf
	}
	c.mu.Unlock()
}

func (c *PlacementCache) lost(err error) {
	c.mu.Lock()
	wasLive := c.liveLocked()
	clear(c.recs)
	c.seq++
	c.syncedAt = time.Time{}
	c.mu.Unlock()
	if wasLive && err != nil {
		c.cfg.Logger.Warn("watch on the fleet's owner records lost: fencing reads Redis on every request until it is back", "error", err)
	}
}
