package fleet_test

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"

	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/internal/redistest"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// The fleet under test: real pools (real python kernels) behind the
// node API on loopback TCP with token auth, a real redis-server, one
// checkpoint store the nodes share, and routers in front.

const (
	adminToken = "admin-token-0123456789abcdef0123456789abcdef"
	acmeToken  = "acme-token-0123456789abcdef0123456789abcdef"
)

// creds are the credentials every node and router accepts.
func creds() *api.Credentials {
	return &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte(adminToken)): {Name: "admin", Admin: true},
		sha256.Sum256([]byte(acmeToken)):  {Name: "acme", OwnerPrefixes: []string{"acme/"}},
	}}
}

type fleetEnv struct {
	t     testing.TB
	reg   *redisreg.Registry
	store pool.CheckpointStore
}

func newFleet(t testing.TB) *fleetEnv {
	t.Helper()
	testenv.RequirePython(t)
	srv := redistest.Start(t)
	reg, err := redisreg.Open(context.Background(), srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	store, err := pool.NewLocalCheckpointStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &fleetEnv{t: t, reg: reg, store: store}
}

// node is one in-process node: a persist pool, its API on loopback TCP,
// and its heartbeat.
type node struct {
	name string
	pool *pool.Pool
	api  *api.Server
	srv  *http.Server
	ln   net.Listener
	url  string
	beat *fleet.Heartbeat
	// placed is the node's watched view of the owner records.
	placed *fleet.PlacementCache
	// marks marks the records of the owners its drain still saves.
	marks *fleet.SaveMarks
	done  chan struct{}
}

func (f *fleetEnv) node(name string) *node {
	t := f.t
	t.Helper()
	p, err := pool.New(pool.Config{StateDir: t.TempDir(), DefaultInterpreter: testenv.Python, CellTimeout: time.Minute,
		Policies:    map[string]pool.CellPolicy{pool.DefaultOwner: {Persist: true}},
		Checkpoints: pool.CheckpointConfig{Store: f.store, Idle: -1},
		Logger:      testenv.Logger(t, hclog.Warn)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, pool: p, url: "http://" + ln.Addr().String(), ln: ln, done: make(chan struct{})}
	n.placed = fleet.StartPlacementCache(fleet.PlacementCacheConfig{Registry: f.reg, Node: name})
	n.marks = fleet.NewSaveMarks(f.reg, name, p.WaitOwnerSaved, nil)
	n.api = api.NewServer(p, api.ServerConfig{MaxKernels: 8, Placement: n.placed.Read, OwnerSaving: n.marks.Saving,
		OwnerSaved: n.marks.Saved})
	n.srv = &http.Server{Handler: n.api.NetworkHandler(creds), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(n.done)
		_ = n.srv.Serve(ln)
	}()
	n.beat = fleet.StartHeartbeat(fleet.HeartbeatConfig{Registry: f.reg, Interval: 200 * time.Millisecond,
		Node: func() fleet.Node {
			return fleet.Node{Name: name, URL: n.url, Draining: n.api.State() != api.StateReady, Max: 8,
				Free: max(0, 8-p.Stats().KernelsLive)}
		}})
	t.Cleanup(func() { n.stop(false) })
	return n
}

// drain drains the node as a daemon does: cells refused with code
// draining, the persist kernels saved; it keeps answering (draining).
func (n *node) drain() {
	n.api.BeginDrain()
	n.beat.Kick()
	n.finishDrain()
}

// finishDrain is the rest of drain after BeginDrain: it closes the pool,
// which waits for the running cells and saves the persist kernels.
func (n *node) finishDrain() {
	_ = n.pool.Close(context.Background())
	n.marks.Wait()
	n.api.EndDrain()
}

// unreachable closes the node's listener (connections refused) while
// its heartbeat and kernels live on: a node cut off from the routers,
// the case fencing exists for.
func (n *node) unreachable() {
	_ = n.srv.Close()
	<-n.done
}

// refuseNew closes the node's listener only: new connections are
// refused while the open ones (a running cell's) carry on.
func (n *node) refuseNew() {
	_ = n.ln.Close()
	<-n.done
}

func (n *node) stop(bool) {
	n.beat.Stop(context.Background())
	n.api.SetDraining()
	_ = n.srv.Close()
	<-n.done
	_ = n.pool.Close(context.Background())
	n.placed.Stop()
}

// kernelsOf counts owner's live kernels on the node.
func (n *node) kernelsOf(owner string) int {
	c := 0
	for _, k := range n.pool.List() {
		if k.Owner == owner {
			c++
		}
	}
	return c
}

// router starts a router on loopback with the test's credentials.
func (f *fleetEnv) router() string { return f.routerWith(f.reg) }

// routerWith starts a router on reg (a wrapper of the fleet's).
func (f *fleetEnv) routerWith(reg fleet.Registry) string {
	t := f.t
	t.Helper()
	rt := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(rt.CloseIdleConnections)
	r := fleet.NewRouter(fleet.RouterConfig{Registry: reg, Transport: rt, NodesTTL: 50 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.Authenticate(creds, r), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// client is a network client of url with token.
func client(t testing.TB, url, token string) *api.Client {
	t.Helper()
	c, err := api.NewNetworkClient(url, api.NetworkOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// exec runs code for owner and returns its output, failing on an error.
func exec(t testing.TB, c *api.Client, owner, code string) *pool.Result {
	t.Helper()
	res, err := c.Execute(context.Background(), pool.Request{Owner: owner, Code: code})
	if err != nil {
		t.Fatalf("Execute(%q, %q): %v", owner, code, err)
	}
	if res.Status != pool.StatusSuccess {
		t.Fatalf("Execute(%q, %q): %+v", owner, code, res)
	}
	return res
}

// waitNodes waits until the registry lists want live nodes.
func (f *fleetEnv) waitNodes(want int) {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ns, err := f.reg.Nodes(context.Background())
		if err == nil && len(ns) == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("registry lists %d nodes (%v), want %d", len(ns), err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
