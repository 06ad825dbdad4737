package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// ownerNode is the node whose pool holds owner's kernel (nil: none).
func ownerNode(owner string, ns ...*node) *node {
	var on *node
	for _, n := range ns {
		if n.kernelsOf(owner) > 0 {
			if on != nil {
				return nil // on two nodes: the caller fails
			}
			on = n
		}
	}
	return on
}

// TestRouterOwnersStickAndDrainMoves: through either of two routers an
// owner's cells run on one node; draining that node moves the owner to
// the other, where a variable set before the drain is there.
func TestRouterOwnersStickAndDrainMoves(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r1, r2 := client(t, f.router(), acmeToken), client(t, f.router(), acmeToken)
	exec(t, r1, "acme/alice", "x = 41")
	first := ownerNode("acme/alice", a, b)
	if first == nil {
		t.Fatal("acme/alice runs on no node, or on both")
	}
	for i := range 4 {
		c := []*api.Client{r1, r2}[i%2]
		if res := exec(t, c, "acme/alice", "x += 1; x"); res.Output != []string{"42\n", "43\n", "44\n", "45\n"}[i] {
			t.Fatalf("cell %d: %+v", i, res)
		}
		if n := ownerNode("acme/alice", a, b); n != first {
			t.Fatalf("cell %d moved the owner off %s", i, first.name)
		}
	}
	rec, _, _ := f.reg.Owner(context.Background(), "acme/alice")
	first.drain()
	other := map[*node]*node{a: b, b: a}[first]
	res := exec(t, r2, "acme/alice", "x")
	if res.Output != "45\n" || !res.Kernel.Restored {
		t.Fatalf("after the drain: %+v", res)
	}
	if other.kernelsOf("acme/alice") != 1 {
		t.Fatalf("the owner's next cell did not run on %s", other.name)
	}
	moved, _, _ := f.reg.Owner(context.Background(), "acme/alice")
	if moved.Node != other.name || moved.Generation <= rec.Generation || moved.State != "moved" {
		t.Fatalf("record after the drain %+v (before %+v)", moved, rec)
	}
}

// TestRouterNodeUnreachableFencedAfter: a node the routers cannot reach
// (connection refused; its heartbeat and kernel live on) loses the
// owner to another node; the cut-off node's generation is fenced there,
// and its late save (it saves first here) never replaces the state the
// new node saves after it.
func TestRouterNodeUnreachableFencedAfter(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), adminToken)
	exec(t, r, "o", "x = 'cut off'")
	old := ownerNode("o", a, b)
	if old == nil {
		t.Fatal("o runs on no node, or on both")
	}
	rec, _, _ := f.reg.Owner(context.Background(), "o")
	old.unreachable()
	// Nothing was saved (no idle saves here): the new node starts empty.
	if res := exec(t, r, "o", "'x' in globals()"); res.Output != "False\n" {
		t.Fatalf("on the new node: %+v", res)
	}
	newNode := map[*node]*node{a: b, b: a}[old]
	if newNode.kernelsOf("o") != 1 {
		t.Fatalf("the owner's next cell did not run on %s", newNode.name)
	}
	moved, _, _ := f.reg.Owner(context.Background(), "o")
	if moved.Node != newNode.name || moved.Generation <= rec.Generation {
		t.Fatalf("record %+v, was %+v", moved, rec)
	}
	exec(t, r, "o", "x = 'new node'")
	// A router that read the record before the move: fenced.
	if err := newNode.pool.Fence("o", rec.Generation); !errors.Is(err, pool.ErrFenced) {
		t.Fatalf("old generation on the new node: %v", err)
	}
	// The cut-off node comes back (a new process: it remembers no
	// generation): a router that read the record before the move is
	// fenced there too, by the record.
	back := f.node(old.name)
	if code := sendGen(t, back.url, "o", rec.Generation); code != http.StatusConflict {
		t.Fatalf("the node that came back answered %d to the old generation, want 409", code)
	}
	if back.kernelsOf("o") != 0 {
		t.Fatal("the node that came back runs the fenced owner")
	}
	// The cut-off node saves late, then the new node saves; the owner's
	// next kernel restores the new node's state.
	_ = old.pool.Close(context.Background())
	_ = newNode.pool.Close(context.Background())
	c := f.node("c")
	if err := c.pool.Fence("o", moved.Generation+1); err != nil {
		t.Fatal(err)
	}
	got, err := c.pool.Execute(context.Background(), pool.Request{Owner: "o", Code: "x"})
	if err != nil || got.Output != "'new node'\n" {
		t.Fatalf("restored %+v, %v; want the new node's state", got, err)
	}
}

// TestRouterStreamsAsTheNodeSends: a streamed cell's first output
// reaches the client through the router while the cell still runs (it
// waits for a file the test creates only once it saw that output).
func TestRouterStreamsAsTheNodeSends(t *testing.T) {
	f := newFleet(t)
	f.node("a")
	f.waitNodes(1)
	r := client(t, f.router(), acmeToken)
	gate := filepath.Join(t.TempDir(), "gate")
	code := "import os, sys, time\nprint('first', flush=True)\nwhile not os.path.exists(" + pyStr(gate) + "):\n    time.sleep(0.01)\nprint('second')"
	var seen []string
	res, err := r.ExecuteLive(context.Background(), pool.Request{Owner: "acme/s", Code: code}, nil, func(ev api.Event) {
		if ev.Event == api.EventStdout {
			seen = append(seen, ev.Text)
			if strings.Contains(ev.Text, "first") {
				_ = os.WriteFile(gate, nil, 0o600)
			}
		}
	})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("streamed cell: %+v, %v (events %q)", res, err, seen)
	}
	if len(seen) < 2 {
		t.Fatalf("stdout events %q", seen)
	}
}

func pyStr(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }

// TestRouterScopeAndNodeEndpoints: a token scoped to acme/ may not act
// for another owner through the router (403, nothing placed); a node's
// own endpoints are refused (501); listing merges the nodes' kernels.
func TestRouterScopeAndNodeEndpoints(t *testing.T) {
	f := newFleet(t)
	f.node("a")
	f.node("b")
	f.waitNodes(2)
	url := f.router()
	acme := client(t, url, acmeToken)
	_, err := acme.Execute(context.Background(), pool.Request{Owner: "bob", Code: "1"})
	if !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("acme token for bob: %v", err)
	}
	if _, ok, _ := f.reg.Owner(context.Background(), "bob"); ok {
		t.Fatal("a refused request placed its owner")
	}
	for _, o := range []string{"acme/1", "acme/2", "acme/3"} {
		exec(t, acme, o, "1")
	}
	admin := client(t, url, adminToken)
	exec(t, admin, "zed", "1")
	ks, err := acme.List(context.Background())
	if err != nil || len(ks) != 3 {
		t.Fatalf("acme lists %d kernels (%v), want its 3", len(ks), err)
	}
	if ks, _ := admin.List(context.Background()); len(ks) != 4 {
		t.Fatalf("admin lists %d kernels, want 4", len(ks))
	}
	if _, err := admin.DrainStatus(context.Background()); !errors.Is(err, pool.ErrBadRequest) && err == nil {
		t.Fatal("a router answered a node's drain endpoint")
	}
	if code, status := routerCall(t, url, "GET", "/v1/settings", ""); status != http.StatusNotImplemented || code != string(api.CodeNotSupported) {
		t.Errorf("GET /v1/settings through the router: %d %q, want 501 not_supported", status, code)
	}
}

// routerCall sends one admin request to the router and returns the error
// code and status of its answer.
func routerCall(t *testing.T, url, method, path, body string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return e.Code, resp.StatusCode
}

// sendGen sends one cell of owner straight to a node with generation
// gen, as a router would, and returns the status.
func sendGen(t *testing.T, url, owner string, gen uint64) int {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/execute", strings.NewReader(`{"owner":"`+owner+`","code":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set(api.HeaderOwnerGeneration, strconv.FormatUint(gen, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestRouterMovesOnDrainingAnswer: a node answers 503 draining while
// the registry still lists it as taking cells (its heartbeat not yet
// published): the router places the owner again on that answer, and
// the client never sees the refusal.
func TestRouterMovesOnDrainingAnswer(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), adminToken)
	// An owner that lands on a.
	owner := ""
	for i := range 64 {
		o := "d" + strconv.Itoa(i)
		exec(t, r, o, "x = 'kept'")
		if a.kernelsOf(o) == 1 {
			owner = o
			break
		}
	}
	if owner == "" {
		t.Fatal("no owner of 64 landed on node a")
	}
	a.beat.Stop(context.Background())
	if err := f.reg.Publish(context.Background(), fleet.Node{Name: "a", URL: a.url, Max: 8, Free: 8}, time.Hour); err != nil {
		t.Fatal(err)
	}
	a.api.BeginDrain()
	_ = a.pool.Close(context.Background())
	res := exec(t, r, owner, "x")
	if res.Output != "'kept'\n" || b.kernelsOf(owner) != 1 {
		t.Fatalf("after node a answered draining: %+v", res)
	}
}
