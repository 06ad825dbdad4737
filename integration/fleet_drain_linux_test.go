//go:build integration && linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestFleetCellDuringDrain: a cell sent through a router while the
// owner's node drains, before the drain saved the owner, loses nothing:
// the router waits for the drain's save (the node marks the owner's
// record saving, then saved) and the cell runs on the other node with
// the variable set before the drain. No idle save runs here, so
// without that wait the other node would restore nothing; a cell of
// another owner keeps the drain from saving until the test interrupts
// it.
func TestFleetCellDuringDrain(t *testing.T) {
	f := newFleetRig(t, "1h", "10m")
	f.node("d1", 61400)
	f.node("d2", 61500)
	f.waitNodes(2)
	u, _ := f.router()
	c := f.client(u)

	f.exec(c, "o", "x = 'set before the drain'")
	rec := f.record("o")
	n := f.nodes[rec.Node]
	blocker := ""
	for i := range 64 {
		b := fmt.Sprintf("b%d", i)
		f.exec(c, b, "1")
		if f.record(b).Node == rec.Node {
			blocker = b
			break
		}
	}
	if blocker == "" {
		t.Fatalf("no owner of 64 landed on %s", rec.Node)
	}
	running := make(chan struct{})
	go func() {
		_, _ = c.ExecuteLive(context.Background(), pool.Request{Owner: blocker,
			Code: "import time\nprint('blocking', flush=True)\nwhile True:\n    time.sleep(0.05)"}, nil,
			func(ev api.Event) {
				if ev.Event == api.EventStdout && strings.Contains(ev.Text, "blocking") {
					close(running)
				}
			})
	}()
	<-running
	direct := f.client(n.url)
	if _, err := direct.Drain(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *pool.Result
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := c.Execute(context.Background(), pool.Request{Owner: "o", Code: "x"})
		answered <- answer{res, err}
	}()
	waitFor(t, scaled(testenv.Patience), "o's record to say its node saves it", func() bool {
		select {
		case a := <-answered:
			t.Fatalf("o's cell was answered before its draining node saved it: %+v, %v", a.res, a.err)
		default:
		}
		p, ok, err := f.reg.Owner(context.Background(), "o")
		return err == nil && ok && p.State == fleet.OwnerSaving
	})
	// The drain goes on once the blocking cell ends (its kernel keeps
	// its state and is saved too).
	if _, err := direct.InterruptOwner(context.Background(), blocker, ""); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(scaled(testenv.Patience)):
		t.Fatal("o's cell was never answered")
	}
	if a.err != nil || a.res.Status != pool.StatusSuccess || a.res.Output != "'set before the drain'\n" || !a.res.Kernel.Restored {
		t.Fatalf("o's cell during the drain: %+v, %v; want x restored on the other node", a.res, a.err)
	}
	if r := f.record("o"); r.Node == rec.Node || r.Generation <= rec.Generation {
		t.Fatalf("o's record after the drain: %+v (before %+v)", r, rec)
	}
	if !n.d.Wait(scaled(testenv.Patience)) {
		t.Fatal("the drained node did not exit")
	}
}
