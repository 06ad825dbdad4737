package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// drainRace is a node draining while it still holds an owner's unsaved
// state: owner set x (no idle saves here, so the store has nothing of
// it) on node on; a cell of another owner on the same node runs until
// the test opens its gate, so the drain's close waits for it before it
// saves the owner.
type drainRace struct {
	f      *fleetEnv
	r      *api.Client
	on     *node
	other  *node
	owner  string
	gate   string
	closed chan struct{} // the drain's close returned
}

func startDrainRace(t *testing.T) *drainRace {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	d := &drainRace{f: f, r: client(t, f.router(), adminToken), owner: "o", gate: filepath.Join(t.TempDir(), "gate"),
		closed: make(chan struct{})}
	exec(t, d.r, d.owner, "x = 'kept'")
	if d.on = ownerNode(d.owner, a, b); d.on == nil {
		t.Fatal("the owner runs on no node, or on both")
	}
	d.other = map[*node]*node{a: b, b: a}[d.on]
	blocker := ""
	for i := range 64 {
		o := fmt.Sprintf("blocker%d", i)
		exec(t, d.r, o, "1")
		if d.on.kernelsOf(o) == 1 {
			blocker = o
			break
		}
	}
	if blocker == "" {
		t.Fatalf("no owner of 64 landed on node %s", d.on.name)
	}
	running := make(chan struct{})
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		code := "import os, time\nprint('blocking', flush=True)\nwhile not os.path.exists(" + pyStr(d.gate) + "):\n    time.sleep(0.01)"
		_, _ = d.r.ExecuteLive(context.Background(), pool.Request{Owner: blocker, Code: code}, nil, func(ev api.Event) {
			if ev.Event == api.EventStdout && strings.Contains(ev.Text, "blocking") {
				close(running)
			}
		})
	}()
	t.Cleanup(func() {
		d.open(t)
		<-blocked
		<-d.closed
	})
	<-running
	d.on.api.BeginDrain()
	d.on.beat.Kick()
	go func() {
		defer close(d.closed)
		d.on.finishDrain()
	}()
	return d
}

// open lets the blocking cell end, and with it the drain.
func (d *drainRace) open(t *testing.T) {
	if err := os.WriteFile(d.gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// send runs code for the owner through the router in the background.
func (d *drainRace) send(code string) <-chan *pool.Result {
	out := make(chan *pool.Result, 1)
	go func() {
		res, err := d.r.Execute(context.Background(), pool.Request{Owner: d.owner, Code: code})
		if err != nil {
			res = &pool.Result{Status: "client error", Error: err.Error()}
		}
		out <- res
	}()
	return out
}

// awaitSaving waits until the owner's record says its node is saving
// it; a cell answered first fails the test (the router placed the
// owner before the drain saved it).
func (d *drainRace) awaitSaving(t *testing.T, answered <-chan *pool.Result) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case res := <-answered:
			t.Fatalf("the owner's cell was answered while its draining node had not saved it: %+v", res)
		default:
		}
		if rec, ok, err := d.f.reg.Owner(context.Background(), d.owner); err == nil && ok && rec.State == fleet.OwnerSaving {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the owner's record never said saving")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRouterWaitsForTheDrainsSave: a cell sent while the owner's node
// drains, before the drain saved the owner, waits for that save and
// then runs on the other node with the state set before the drain.
func TestRouterWaitsForTheDrainsSave(t *testing.T) {
	d := startDrainRace(t)
	answered := d.send("x")
	d.awaitSaving(t, answered)
	d.open(t)
	res := <-answered
	if res.Status != pool.StatusSuccess || res.Output != "'kept'\n" || !res.Kernel.Restored {
		t.Fatalf("after the drain: %+v (error %+v), want x = 'kept' restored", res, res.Error)
	}
	if d.other.kernelsOf(d.owner) != 1 {
		t.Fatalf("the owner's cell did not run on %s", d.other.name)
	}
	rec, _, _ := d.f.reg.Owner(context.Background(), d.owner)
	if rec.Node != d.other.name || rec.State != fleet.OwnerMoved {
		t.Fatalf("record after the move: %+v", rec)
	}
}

// TestRouterDrainingNodeGoneMidSave: when the draining node goes away
// before it saved the owner (it refuses connections, or its heartbeat
// ends), a waiting cell stops waiting and runs on another node, from
// the owner's last save (none here: x is lost, as after a kill).
func TestRouterDrainingNodeGoneMidSave(t *testing.T) {
	for _, c := range []struct {
		name string
		gone func(n *node)
	}{
		{"connections refused", (*node).refuseNew},
		{"heartbeat gone", func(n *node) { n.beat.Stop(context.Background()) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := startDrainRace(t)
			answered := d.send("'x' in globals()")
			d.awaitSaving(t, answered)
			c.gone(d.on)
			res := <-answered
			if res.Status != pool.StatusSuccess || res.Output != "False\n" {
				t.Fatalf("after the node went away: %+v", res)
			}
			if d.other.kernelsOf(d.owner) != 1 {
				t.Fatalf("the owner's cell did not run on %s", d.other.name)
			}
		})
	}
}

// TestRouterStaleSavingMarkCleared: a record left saving (an earlier
// drain of the node died before its save) does not hold the owner's
// cells for the whole of the node's next drain: the node, holding
// nothing unsaved of the owner, marks it saved as it refuses the cell.
func TestRouterStaleSavingMarkCleared(t *testing.T) {
	d := startDrainRace(t)
	for _, k := range d.on.pool.List() {
		if k.Owner == d.owner {
			if err := d.on.pool.Kill(k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ok, err := d.f.reg.Mark(context.Background(), d.owner, d.on.name, fleet.OwnerSaving); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	select {
	case res := <-d.send("'x' in globals()"):
		if res.Status != pool.StatusSuccess || res.Output != "False\n" || d.other.kernelsOf(d.owner) != 1 {
			t.Fatalf("the owner's cell: %+v", res)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the owner's cell waited on a saving mark its node had nothing to save for")
	}
}
