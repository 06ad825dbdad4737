package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestRouterDrainKeepsEveryAnsweredCell: two cells of one owner around
// a drain's start. Cell A sets x and runs on until the test lets it
// end; cell B (x += 1) waits in the node's pool behind A; the drain
// starts, then A ends (answered 200). B, refused by the closing pool,
// must not move the owner before the drain saved A's x: the router
// waits for that save (another owner's running cell holds it back
// here), then B runs on the other node with A's effect restored. Every
// cell answered 200 is in the state the owner moves with.
func TestRouterDrainKeepsEveryAnsweredCell(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), adminToken)
	const owner = "o"
	exec(t, r, owner, "x = 0")
	on := ownerNode(owner, a, b)
	if on == nil {
		t.Fatal("the owner runs on no node, or on both")
	}
	other := map[*node]*node{a: b, b: a}[on]
	dir := t.TempDir()
	gateA, gateBlocker := filepath.Join(dir, "a"), filepath.Join(dir, "blocker")
	open := func(gate string) {
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Opened however the test ends, so the drain and its cells end.
	t.Cleanup(func() { open(gateA); open(gateBlocker) })
	blocking := func(set, gate string) string {
		return set + "\nimport os, time\nprint('running', flush=True)\nwhile not os.path.exists(" + pyStr(gate) + "):\n    time.sleep(0.01)"
	}

	blocker := ownerOn(t, r, on, other)
	blockerDone := runLive(t, r, blocker, blocking("", gateBlocker))
	aDone := runLive(t, r, owner, blocking("x = 1", gateA))
	bDone := make(chan *pool.Result, 1)
	go func() {
		res, err := r.Execute(context.Background(), pool.Request{Owner: owner, Code: "x += 1; x"})
		if err != nil {
			res = &pool.Result{Status: "client error", Error: err.Error()}
		}
		bDone <- res
	}()
	waitFor(t, "cell B to wait in the pool behind cell A", func() bool { return cellsQueued() == 1 })

	on.api.BeginDrain()
	on.beat.Kick()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		on.finishDrain()
	}()
	t.Cleanup(func() { open(gateA); open(gateBlocker); <-drained })
	open(gateA)
	if res := <-aDone; res.err != nil || res.res.Status != pool.StatusSuccess {
		t.Fatalf("cell A: %+v, %v", res.res, res.err)
	}
	// A's x is in no save yet (the blocker holds the drain's close):
	// B must not be answered before the owner's record says so.
	waitFor(t, "the owner's record to say its node saves it", func() bool {
		select {
		case res := <-bDone:
			t.Fatalf("cell B was answered before the drain saved cell A's x: %+v", res)
		default:
		}
		rec, ok, err := f.reg.Owner(context.Background(), owner)
		return err == nil && ok && rec.State == fleet.OwnerSaving
	})
	open(gateBlocker)
	if res := <-blockerDone; res.err != nil {
		t.Fatalf("the blocking cell: %v", res.err)
	}
	res := <-bDone
	if res.Status != pool.StatusSuccess || res.Output != "2\n" || !res.Kernel.Restored {
		t.Fatalf("cell B after the drain: %+v (error %q), want x = 2 from A's x restored", res, res.Error)
	}
	if other.kernelsOf(owner) != 1 {
		t.Fatalf("cell B did not run on %s", other.name)
	}
	if got := exec(t, r, owner, "x"); got.Output != "2\n" {
		t.Fatalf("the moved owner's x: %q, want 2", got.Output)
	}
}

// ownerOn finds an owner that the router places on node on (not other).
func ownerOn(t *testing.T, r *api.Client, on, other *node) string {
	t.Helper()
	for i := range 64 {
		o := fmt.Sprintf("blocker%d", i)
		exec(t, r, o, "1")
		if on.kernelsOf(o) == 1 {
			return o
		}
	}
	t.Fatalf("no owner of 64 landed on node %s", on.name)
	return ""
}

type liveAnswer struct {
	res *pool.Result
	err error
}

// runLive runs code for owner through r in the background, returning
// once the cell printed "running".
func runLive(t *testing.T, r *api.Client, owner, code string) <-chan liveAnswer {
	t.Helper()
	running, done := make(chan struct{}), make(chan liveAnswer, 1)
	go func() {
		var once bool
		res, err := r.ExecuteLive(context.Background(), pool.Request{Owner: owner, Code: code}, nil, func(ev api.Event) {
			if !once && ev.Event == api.EventStdout && strings.Contains(ev.Text, "running") {
				once = true
				close(running)
			}
		})
		if !once {
			close(running)
		}
		done <- liveAnswer{res, err}
	}()
	<-running
	return done
}

// cellsQueued counts the cells of this process's pools that wait for
// their kernel's running cell (blocked in the pool's slot semaphore):
// the goroutines parked in Pool.executeOn's select.
func cellsQueued() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	c := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		// "goroutine N [select]:" then its top frame (runtime frames are
		// not shown).
		head, rest, _ := strings.Cut(string(g), "\n")
		if strings.Contains(head, "[select") && strings.HasPrefix(rest, "github.com/kernpool/kernpool/pool.(*Pool).executeOn(") {
			c++
		}
	}
	return c
}
