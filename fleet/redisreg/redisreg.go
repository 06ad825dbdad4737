package redisreg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kernpool/kernpool/fleet"
)

// DefaultPrefix is the key prefix of New without WithPrefix.
const DefaultPrefix = "kernpool:"

// maxNodes bounds a node listing (a registry filled by another writer
// is refused rather than read without bound).
const maxNodes = 4096

// maxOwner bounds an owner name used in a key (the API caps owners far
// below this).
const maxOwner = 1024

// Registry is fleet.Registry on one Redis server (or a proxy that runs
// Lua scripts atomically).
type Registry struct {
	rdb    *redis.Client
	prefix string
}

var _ fleet.Registry = (*Registry)(nil)

// Open connects to the Redis server at url (redis://[:password@]host:port/db,
// rediss:// for TLS, unix:///path/redis.sock) and checks it answers.
// password, when set, replaces the URL's (kept out of config files).
func Open(ctx context.Context, url, password string) (*Registry, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: fleet_redis %q: %v", fleet.ErrRegistry, redactURL(url), err)
	}
	if password != "" {
		opt.Password = password
	}
	opt.DisableIdentity = true // no CLIENT SETINFO: older servers log it as an error
	r := &Registry{rdb: redis.NewClient(opt), prefix: DefaultPrefix}
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		_ = r.rdb.Close()
		return nil, fmt.Errorf("%w: ping %s: %v", fleet.ErrRegistry, opt.Addr, err)
	}
	return r, nil
}

// redactURL drops a URL's password for an error message.
func redactURL(u string) string {
	opt, err := redis.ParseURL(u)
	if err != nil {
		return "(unparsable)"
	}
	return opt.Network + "://" + opt.Addr
}

// Close closes the connections.
func (r *Registry) Close() error { return r.rdb.Close() }

func (r *Registry) nodeKey(name string) string   { return r.prefix + "node:" + name }
func (r *Registry) ownerKey(owner string) string { return r.prefix + "owner:" + owner }

// Publish registers n for ttl.
func (r *Registry) Publish(ctx context.Context, n fleet.Node, ttl time.Duration) error {
	if err := n.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	_, err = r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, r.nodeKey(n.Name), b, ttl)
		p.SAdd(ctx, r.prefix+"nodes", n.Name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: publish node %s: %v", fleet.ErrRegistry, n.Name, err)
	}
	return nil
}

// Withdraw removes name's registration.
func (r *Registry) Withdraw(ctx context.Context, name string) error {
	if _, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, r.nodeKey(name))
		p.SRem(ctx, r.prefix+"nodes", name)
		return nil
	}); err != nil {
		return fmt.Errorf("%w: withdraw node %s: %v", fleet.ErrRegistry, name, err)
	}
	return nil
}

// Nodes lists the live registrations; names whose key expired are
// pruned from the set. A malformed registration is skipped.
func (r *Registry) Nodes(ctx context.Context) ([]fleet.Node, error) {
	names, err := r.rdb.SRandMemberN(ctx, r.prefix+"nodes", maxNodes+1).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: list nodes: %v", fleet.ErrRegistry, err)
	}
	if len(names) > maxNodes {
		return nil, fmt.Errorf("%w: more than %d nodes registered", fleet.ErrRegistry, maxNodes)
	}
	if len(names) == 0 {
		return nil, nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = r.nodeKey(n)
	}
	vals, err := r.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: read nodes: %v", fleet.ErrRegistry, err)
	}
	var out []fleet.Node
	var gone []any
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			gone = append(gone, names[i])
			continue
		}
		var n fleet.Node
		if json.Unmarshal([]byte(s), &n) != nil || n.Name != names[i] || n.Validate() != nil {
			continue
		}
		out = append(out, n)
	}
	if len(gone) > 0 {
		// A node that comes back re-adds itself; a failed prune is retried
		// by the next listing.
		_ = r.rdb.SRem(ctx, r.prefix+"nodes", gone...).Err()
	}
	return out, nil
}

// Owner reads owner's record.
func (r *Registry) Owner(ctx context.Context, owner string) (fleet.Placement, bool, error) {
	if len(owner) > maxOwner {
		return fleet.Placement{}, false, fmt.Errorf("%w: owner name over %d bytes", fleet.ErrRegistry, maxOwner)
	}
	vals, err := r.rdb.HMGet(ctx, r.ownerKey(owner), "node", "gen", "state").Result()
	if err != nil {
		return fleet.Placement{}, false, fmt.Errorf("%w: read owner %q: %v", fleet.ErrRegistry, owner, err)
	}
	return record(vals)
}

// record decodes HMGET node gen state.
func record(vals []any) (fleet.Placement, bool, error) {
	if len(vals) != 3 || vals[0] == nil {
		return fleet.Placement{}, false, nil
	}
	node, _ := vals[0].(string)
	gs, _ := vals[1].(string)
	state, _ := vals[2].(string)
	if node == "" && (gs == "" || gs == "0") {
		return fleet.Placement{}, false, nil // the script's answer for no record
	}
	gen, err := strconv.ParseUint(gs, 10, 64)
	if err != nil || node == "" {
		return fleet.Placement{}, false, fmt.Errorf("%w: malformed owner record {%q %q}", fleet.ErrRegistry, node, gs)
	}
	return fleet.Placement{Node: node, Generation: gen, State: fleet.OwnerState(state)}, true, nil
}

// placeScript compares the record's generation with ARGV[1] (0: no
// record) and, when equal, takes the next fleet-wide generation, writes
// the record and publishes the owner (ARGV[4]) on the watch channel
// (KEYS[3]) in the same step; either way it returns {wrote, node, gen,
// state}.
var placeScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'node', 'gen', 'state')
local g = tonumber(cur[2] or '0')
if g ~= tonumber(ARGV[1]) then
  return {0, cur[1] or '', tostring(g), cur[3] or ''}
end
local n = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'node', ARGV[2], 'gen', n, 'state', ARGV[3])
redis.call('PUBLISH', KEYS[3], ARGV[4])
return {1, ARGV[2], tostring(n), ARGV[3]}
`)

// Place records owner on node under a new generation if the record's
// generation is still prev.
func (r *Registry) Place(ctx context.Context, owner string, prev uint64, node string, state fleet.OwnerState) (fleet.Placement, bool, error) {
	if len(owner) > maxOwner {
		return fleet.Placement{}, false, fmt.Errorf("%w: owner name over %d bytes", fleet.ErrRegistry, maxOwner)
	}
	res, err := placeScript.Run(ctx, r.rdb, []string{r.ownerKey(owner), r.prefix + "gen", r.watchChannel()},
		strconv.FormatUint(prev, 10), node, string(state), owner).Slice()
	if err != nil {
		return fleet.Placement{}, false, fmt.Errorf("%w: place owner %q: %v", fleet.ErrRegistry, owner, err)
	}
	if len(res) != 4 {
		return fleet.Placement{}, false, fmt.Errorf("%w: place owner %q: %d values", fleet.ErrRegistry, owner, len(res))
	}
	wrote, _ := res[0].(int64)
	p, ok, err := record(res[1:])
	if err == nil && !ok && wrote == 1 {
		err = errors.New("no record after place")
	}
	if err != nil {
		return fleet.Placement{}, false, fmt.Errorf("%w: place owner %q: %v", fleet.ErrRegistry, owner, err)
	}
	return p, wrote == 1, nil
}

// forgetScript deletes the record when its generation is ARGV[1] and
// publishes the owner (ARGV[2]) on the watch channel (KEYS[2]).
var forgetScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') == ARGV[1] then
  redis.call('PUBLISH', KEYS[2], ARGV[2])
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Forget deletes owner's record if its generation is gen.
func (r *Registry) Forget(ctx context.Context, owner string, gen uint64) error {
	if err := forgetScript.Run(ctx, r.rdb, []string{r.ownerKey(owner), r.watchChannel()}, strconv.FormatUint(gen, 10), owner).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: forget owner %q: %v", fleet.ErrRegistry, owner, err)
	}
	return nil
}

// markScript sets the record's state (ARGV[2]) when it names node
// ARGV[1]. Node and generation stay, so nodes' watched views of the
// records (which hold those only) need no notice.
var markScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'node') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', ARGV[2])
  return 1
end
return 0
`)

// Mark sets owner's record's state if the record names node.
func (r *Registry) Mark(ctx context.Context, owner, node string, state fleet.OwnerState) (bool, error) {
	if len(owner) > maxOwner {
		return false, fmt.Errorf("%w: owner name over %d bytes", fleet.ErrRegistry, maxOwner)
	}
	n, err := markScript.Run(ctx, r.rdb, []string{r.ownerKey(owner)}, node, string(state)).Int()
	if err != nil {
		return false, fmt.Errorf("%w: mark owner %q %s: %v", fleet.ErrRegistry, owner, state, err)
	}
	return n == 1, nil
}
