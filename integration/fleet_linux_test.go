//go:build integration && linux

package integration

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/internal/redistest"
	"github.com/kernpool/kernpool/internal/s3test"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// fleetToken is the admin token of every node and router of the test.
const fleetToken = "fleet-it-admin-token-0123456789abcdef0123456789abcdef"

// fleetRig is the fleet under test: real `kernpool serve` nodes (own
// state dir, cgroup parent, uid range, token listener on loopback) and
// `kernpool router` processes over one redis-server and one S3 store.
type fleetRig struct {
	t     *testing.T
	redis string
	s3    string
	reg   *redisreg.Registry
	nodes map[string]*fleetNode
	// idle and grace are the nodes' checkpoint_idle and drain_grace
	// ("300ms" and the default when empty).
	idle, grace string
}

// newFleetRig starts the fleet's shared services (a real redis-server
// and S3 server) for nodes with checkpoint_idle idle and drain_grace
// grace (empty: see fleetRig); it skips where no daemon can run.
func newFleetRig(t *testing.T, idle, grace string) *fleetRig {
	t.Helper()
	requireDaemon(t)
	rd := redistest.Start(t)
	s3 := s3test.Start(t, "ckpt")
	reg, err := redisreg.Open(context.Background(), rd.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return &fleetRig{t: t, redis: rd.URL, s3: s3.URL, reg: reg, nodes: map[string]*fleetNode{}, idle: idle, grace: grace}
}

type fleetNode struct {
	d    *Daemon
	url  string
	opts Opts
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tokenBlock() string {
	return fmt.Sprintf("token \"admin\" {\n  sha256 = %q\n  admin = true\n}\n", api.TokenDigest(fleetToken))
}

// node starts node name with uids from uidBase.
func (f *fleetRig) node(name string, uidBase int) *fleetNode {
	addr := freePort(f.t)
	cfg := fmt.Sprintf(`listen = %q
fleet_redis = %q
node_name = %q
advertise_url = "http://%s"
fleet_heartbeat = "200ms"
checkpoint_store = "s3://ckpt/it"
checkpoint_store_endpoint = %q
checkpoint_store_allow_http = true
checkpoint_idle = %q
drain_grace = %q
users {
  uid_range = "%d-%d"
}
profile "default" {
  persist = true
}
`, addr, f.redis, name, addr, f.s3, cmp.Or(f.idle, "300ms"), cmp.Or(f.grace, "10s"), uidBase, uidBase+99) + tokenBlock()
	o := Opts{Config: cfg, Env: []string{"AWS_ACCESS_KEY_ID=it", "AWS_SECRET_ACCESS_KEY=it-secret", "AWS_REGION=us-east-1"}}
	n := &fleetNode{d: StartDaemon(f.t, o), url: "http://" + addr, opts: o}
	f.nodes[name] = n
	return n
}

// router starts a `kernpool router` process and waits until it is ready.
func (f *fleetRig) router() (string, *exec.Cmd) {
	t := f.t
	dir := t.TempDir()
	addr := freePort(t)
	conf := filepath.Join(dir, "router.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listen = %q\nfleet_redis = %q\nfleet_heartbeat = \"200ms\"\n", addr, f.redis)+tokenBlock()), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "router.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kernpoolBin, "router", "--config", conf)
	cmd.Env = baseEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("router %s log:\n%s", addr, b)
		}
	})
	url := "http://" + addr
	c := f.client(url)
	waitFor(t, scaled(testenv.Patience), "the router to be ready", func() bool {
		st, err := c.Ready(context.Background())
		return err == nil && st == api.StateReady
	})
	return url, cmd
}

func (f *fleetRig) client(url string) *api.Client {
	c, err := api.NewNetworkClient(url, api.NetworkOptions{Token: fleetToken})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(c.CloseIdleConnections)
	return c
}

func (f *fleetRig) exec(c *api.Client, owner, code string) string {
	f.t.Helper()
	res, err := c.Execute(context.Background(), pool.Request{Owner: owner, Code: code})
	if err != nil || res.Status != pool.StatusSuccess {
		f.t.Fatalf("%s: %q: %+v, %v", owner, code, res, err)
	}
	return strings.TrimSpace(res.Output)
}

func (f *fleetRig) record(owner string) fleet.Placement {
	p, ok, err := f.reg.Owner(context.Background(), owner)
	if err != nil || !ok {
		f.t.Fatalf("record of %s: %v %v", owner, ok, err)
	}
	return p
}

func (f *fleetRig) waitNodes(want int) {
	waitFor(f.t, scaled(testenv.Patience), fmt.Sprintf("%d live nodes", want), func() bool {
		ns, err := f.reg.Nodes(context.Background())
		return err == nil && len(ns) == want
	})
}

// TestFleet: three nodes, two routers. Owners stick; a drain moves its
// owners with their state; kill -9 of a node loses only the work since
// the last save and the next cell answers from another node; the node
// that comes back cannot run the fenced owner; a router killed
// mid-stream leaves the other serving; a new node takes new owners and
// no running owner moves.
func TestFleet(t *testing.T) {
	f := newFleetRig(t, "", "")
	f.node("n1", 61000)
	f.node("n2", 61100)
	f.node("n3", 61200)
	f.waitNodes(3)
	u1, r1cmd := f.router()
	u2, _ := f.router()
	c1, c2 := f.client(u1), f.client(u2)

	owners := []string{"o1", "o2", "o3", "o4", "o5", "o6"}
	before := map[string]fleet.Placement{}
	for _, o := range owners {
		f.exec(c1, o, fmt.Sprintf("x = %q", o))
		before[o] = f.record(o)
	}
	t.Run("owners stick", func(t *testing.T) {
		for _, o := range owners {
			if got := f.exec(c2, o, "x"); got != fmt.Sprintf("'%s'", o) {
				t.Fatalf("%s: x = %s", o, got)
			}
			if f.record(o) != before[o] {
				t.Fatalf("%s moved: %+v then %+v", o, before[o], f.record(o))
			}
		}
	})

	t.Run("tool calls are answered through the router", func(t *testing.T) {
		// The answer goes to POST /v1/tool-calls/{id}, which the router
		// sends to each node until the one that holds the call.
		res, err := c2.ExecuteStream(context.Background(), pool.Request{Owner: "o3", Tools: []string{"echo"},
			Code: "import kernpool_tools\nprint('got', kernpool_tools.call('echo', {'x': 41}))"},
			pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
				return "answered " + string(c.Args), nil
			}))
		if err != nil || res.Status != pool.StatusSuccess || !strings.Contains(res.Output, `got answered {"x":41}`) {
			t.Fatalf("tool call through the router: %+v, %v", res, err)
		}
	})

	t.Run("drain moves owners with their state", func(t *testing.T) {
		drained := before["o1"].Node
		n := f.nodes[drained]
		cmd := exec.Command(kernpoolBin, "drain", "--url", n.url)
		cmd.Env = append(baseEnv(), "KERNPOOL_TOKEN="+fleetToken)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kernpool drain: %v\n%s", err, out)
		}
		if !n.d.Wait(scaled(testenv.Patience)) {
			t.Fatal("the drained node did not exit")
		}
		for _, o := range owners {
			if before[o].Node != drained {
				continue
			}
			if got := f.exec(c1, o, "x"); got != fmt.Sprintf("'%s'", o) {
				t.Fatalf("%s after the drain: x = %s", o, got)
			}
			if r := f.record(o); r.Node == drained || r.Generation <= before[o].Generation {
				t.Fatalf("%s record after the drain: %+v", o, r)
			}
		}
		delete(f.nodes, drained)
	})

	var killed *fleetNode
	var killedRec fleet.Placement
	var killedOwner string
	t.Run("kill -9 loses only the work since the last save", func(t *testing.T) {
		o := ""
		for _, cand := range owners {
			if _, live := f.nodes[f.record(cand).Node]; live {
				o = cand
				break
			}
		}
		if o == "" {
			t.Fatal("no owner on a live node")
		}
		killedRec, killedOwner = f.record(o), o
		killed = f.nodes[killedRec.Node]
		f.exec(c1, o, "y = 'saved'")
		node := f.client(killed.url)
		waitFor(t, scaled(testenv.Patience), o+"'s idle save", func() bool {
			l, err := node.Listing(context.Background())
			if err != nil {
				return false
			}
			for _, c := range l.Checkpoints {
				if c.Owner == o && c.Names > 0 {
					return true
				}
			}
			return false
		})
		// A cell that changes y and stays busy (no idle save), killed
		// with its node.
		seen := make(chan struct{})
		go func() {
			_, _ = c1.ExecuteLive(context.Background(), pool.Request{Owner: o,
				Code: "import time\ny = 'lost'\nprint('running', flush=True)\nwhile True:\n    time.sleep(0.05)"}, nil,
				func(ev api.Event) {
					if ev.Event == api.EventStdout && strings.Contains(ev.Text, "running") {
						close(seen)
					}
				})
		}()
		<-seen
		killed.d.Signal(syscall.SIGKILL)
		if !killed.d.Wait(scaled(testenv.Patience)) {
			t.Fatal("the killed node did not exit")
		}
		if got := f.exec(c2, o, "y"); got != "'saved'" {
			t.Fatalf("%s after kill -9: y = %s, want the saved value", o, got)
		}
		if r := f.record(o); r.Node == killedRec.Node {
			t.Fatalf("%s still placed on the killed node: %+v", o, r)
		}
	})

	t.Run("a node that comes back cannot run a fenced owner", func(t *testing.T) {
		killed.d.Restart(killed.opts)
		// The killed owner, under the generation it had there: what a
		// router that read the record before the move would send.
		req, _ := http.NewRequest("POST", killed.url+"/v1/execute", strings.NewReader(fmt.Sprintf(`{"owner":%q,"code":"1"}`, killedOwner)))
		req.Header.Set("Authorization", "Bearer "+fleetToken)
		req.Header.Set(api.HeaderOwnerGeneration, fmt.Sprint(killedRec.Generation))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict {
			t.Fatalf("the node that came back answered %d, want 409 fenced", resp.StatusCode)
		}
	})

	t.Run("a router killed mid-stream, the other serves", func(t *testing.T) {
		o := "o2"
		want := f.exec(c2, o, "x")
		seen := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			_, err := c1.ExecuteLive(context.Background(), pool.Request{Owner: o,
				Code: "import time\nprint('streaming', flush=True)\nwhile True:\n    time.sleep(0.05)"}, nil,
				func(ev api.Event) {
					if ev.Event == api.EventStdout && strings.Contains(ev.Text, "streaming") {
						close(seen)
					}
				})
			errc <- err
		}()
		<-seen
		_ = r1cmd.Process.Kill()
		if err := <-errc; err == nil {
			t.Fatal("the stream through the killed router ended without an error")
		}
		if got := f.exec(c2, o, "x"); got != want {
			t.Fatalf("%s through the other router: x = %s, want %s", o, got, want)
		}
	})

	t.Run("a new node takes new owners, no running owner moves", func(t *testing.T) {
		placed := map[string]fleet.Placement{}
		for _, o := range owners {
			placed[o] = f.record(o)
		}
		f.node("n4", 61300)
		f.waitNodes(len(f.nodes))
		onNew := 0
		for i := range 24 {
			o := fmt.Sprintf("new-%02d", i)
			f.exec(c2, o, "1")
			if f.record(o).Node == "n4" {
				onNew++
			}
		}
		if onNew == 0 {
			t.Fatal("the new node took none of 24 new owners")
		}
		for _, o := range owners {
			f.exec(c2, o, "x")
			if r := f.record(o); r != placed[o] {
				t.Fatalf("%s moved when a node joined: %+v then %+v", o, placed[o], r)
			}
		}
	})
}
