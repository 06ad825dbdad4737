package fleet

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// Node is what a node publishes with each heartbeat: where it serves,
// whether it drains, and how many more kernels it can hold.
type Node struct {
	// Name identifies the node in the fleet (node_name).
	Name string `json:"name"`
	// URL is where routers reach its API (advertise_url).
	URL string `json:"url"`
	// Draining: the node takes no cells; its owners are moved.
	Draining bool `json:"draining"`
	// Free and Max are its free and total kernel slots (max_kernels).
	Free int `json:"free"`
	Max  int `json:"max"`
}

// nodeName is what a node may be called: it is part of a Redis key
// and of logs.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Validate checks a registration (published or read back).
func (n Node) Validate() error {
	if !nodeName.MatchString(n.Name) {
		return fmt.Errorf("%w: name %q (letters, digits, '.', '_', '-'; at most 63)", ErrBadNode, n.Name)
	}
	u, err := url.Parse(n.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" && u.Path != "/" {
		return fmt.Errorf("%w: url %q (want http[s]://host:port)", ErrBadNode, n.URL)
	}
	if n.Max < 0 || n.Free < 0 {
		return fmt.Errorf("%w: negative capacity", ErrBadNode)
	}
	return nil
}

// OwnerState is why an owner's record points at its node.
type OwnerState string

const (
	// OwnerPlaced: the owner was placed on a node for the first time.
	OwnerPlaced OwnerState = "placed"
	// OwnerMoved: its node went away or drained; the owner was placed
	// again and its next cell restores from the checkpoint store.
	OwnerMoved OwnerState = "moved"
	// OwnerSaving: the owner's node drains (or shuts down) and still
	// holds state of the owner that it will save: routers wait for
	// OwnerSaved, or for the node to be gone, before they place the
	// owner elsewhere (whose restore would otherwise load an older save).
	OwnerSaving OwnerState = "saving"
	// OwnerSaved: the draining node saved the owner's state (or failed
	// to, and said why in its log): the owner may be placed elsewhere.
	OwnerSaved OwnerState = "saved"
)

// Placement is an owner's record: the node that runs it, under which
// generation (fleet-wide increasing: every placement of any owner takes
// a new one), and why.
type Placement struct {
	Node       string     `json:"node"`
	Generation uint64     `json:"generation"`
	State      OwnerState `json:"state"`
}

// Registry is the port the fleet's shared state is kept behind. Every
// method is safe for concurrent use by any number of routers and nodes.
type Registry interface {
	// Publish registers n for ttl (a heartbeat renews it).
	Publish(ctx context.Context, n Node, ttl time.Duration) error
	// Withdraw removes node name's registration (a clean stop).
	Withdraw(ctx context.Context, name string) error
	// Nodes lists the registered nodes whose heartbeat is live.
	Nodes(ctx context.Context) ([]Node, error)
	// Owner reads owner's record (ok false: none).
	Owner(ctx context.Context, owner string) (p Placement, ok bool, err error)
	// Place records owner on node under a new generation, atomically,
	// only if the record's generation is still prev (0: no record). It
	// returns the record stored after the call and whether this call
	// wrote it: a concurrent Place by another router wins, and its
	// record is returned.
	Place(ctx context.Context, owner string, prev uint64, node string, state OwnerState) (Placement, bool, error)
	// Forget deletes owner's record if its generation is gen.
	Forget(ctx context.Context, owner string, gen uint64) error
	// Mark sets the state of owner's record, keeping its node and
	// generation, only if the record names node (a draining node marks
	// the owners it saves); it reports whether it did.
	Mark(ctx context.Context, owner, node string, state OwnerState) (bool, error)
}

// OwnerEvents receives an OwnerWatcher's events.
type OwnerEvents struct {
	// Changed: owner's record was written or deleted.
	Changed func(owner string)
	// Synced: every record change committed before asOf has been
	// delivered to Changed.
	Synced func(asOf time.Time)
	// Lost: the watch broke, changes may have been missed since the
	// last Synced; it reconnects by itself.
	Lost func(err error)
}

// OwnerWatcher is a Registry that reports changes of the owner records
// as they are committed (redisreg: Redis pub/sub). A node caches the
// records it checks fencing against only while its watch is Synced
// (PlacementCache).
type OwnerWatcher interface {
	// WatchOwners delivers events to ev until ctx ends, confirming the
	// watch current (Synced) about every interval.
	WatchOwners(ctx context.Context, interval time.Duration, ev OwnerEvents)
}
