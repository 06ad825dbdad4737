package fleet_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestRouterSessionNodeFailsMidCell: a session cell whose node stops
// answering mid-cell (its connections cut) is answered 502 node_failed
// through the router, as an owner's cell is, never 404 not_found from
// the nodes that never held the session; so are the session and its
// files while its node is listed but unreachable.
func TestRouterSessionNodeFailsMidCell(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), acmeToken)
	ctx := context.Background()
	s, err := r.CreateSession(ctx, pool.SessionSpec{Owner: "acme/s"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Execute(ctx, pool.Request{Session: s.ID, Code: "1"}); err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("first session cell: %+v, %v", res, err)
	}
	holder := ownerNode("acme/s", a, b)
	if holder == nil {
		t.Fatal("the session's kernel runs on no node, or on both")
	}
	answered := make(chan error, 1)
	go func() {
		_, err := r.Execute(ctx, pool.Request{Session: s.ID, Code: "import time\nwhile True:\n    time.sleep(0.05)"})
		answered <- err
	}()
	waitBusy(t, holder, "acme/s", answered)
	holder.unreachable()
	if err := <-answered; !isNodeFailed(err) {
		t.Fatalf("the session cell whose node failed mid-cell: %v, want 502 %s", err, api.CodeNodeFailed)
	}
	if _, err := r.Session(ctx, s.ID); !isNodeFailed(err) {
		t.Fatalf("the session of an unreachable node: %v, want 502 %s", err, api.CodeNodeFailed)
	}
	if _, err := r.ListFiles(ctx, api.FileTarget{Session: s.ID}, ""); !isNodeFailed(err) {
		t.Fatalf("the files of a session of an unreachable node: %v, want 502 %s", err, api.CodeNodeFailed)
	}
}

// TestRouterStreamedCellNodeFailsMidCell: a streamed cell (an owner's
// or a session's) whose node stops answering after its first event ends
// with an error event node_failed through the router, after the events
// the node sent, not with a stream that just stops.
func TestRouterStreamedCellNodeFailsMidCell(t *testing.T) {
	for _, viaSession := range []bool{false, true} {
		t.Run(map[bool]string{false: "owner", true: "session"}[viaSession], func(t *testing.T) {
			f := newFleet(t)
			a, b := f.node("a"), f.node("b")
			f.waitNodes(2)
			r := client(t, f.router(), acmeToken)
			ctx := context.Background()
			req := pool.Request{Owner: "acme/st", Code: "print('first')\nimport time\nwhile True:\n    time.sleep(0.05)"}
			if viaSession {
				s, err := r.CreateSession(ctx, pool.SessionSpec{Owner: "acme/st"})
				if err != nil {
					t.Fatal(err)
				}
				req = pool.Request{Session: s.ID, Code: req.Code}
			}
			first := make(chan string, 1)
			answered := make(chan error, 1)
			go func() {
				_, err := r.ExecuteLive(ctx, req, nil, func(ev api.Event) {
					if ev.Event == api.EventStdout {
						select {
						case first <- ev.Text:
						default:
						}
					}
				})
				answered <- err
			}()
			select {
			case text := <-first:
				if text != "first\n" {
					t.Fatalf("first event %q", text)
				}
			case err := <-answered:
				t.Fatalf("the cell ended before its first event: %v", err)
			}
			holder := ownerNode("acme/st", a, b)
			if holder == nil {
				t.Fatal("the cell's kernel runs on no node, or on both")
			}
			holder.unreachable()
			var ae *api.APIError
			if err := <-answered; !errors.As(err, &ae) || ae.Code != api.CodeNodeFailed || !strings.Contains(ae.Message, "node "+holder.name) {
				t.Fatalf("the streamed cell whose node failed mid-cell: %v, want the error event %s naming node %s", err, api.CodeNodeFailed, holder.name)
			}
		})
	}
}

// waitBusy waits until owner's kernel on n runs a cell; an answer on
// answered before that fails the test.
func waitBusy(t *testing.T, n *node, owner string, answered <-chan error) {
	t.Helper()
	waitFor(t, owner+"'s cell to run on "+n.name, func() bool {
		select {
		case err := <-answered:
			t.Fatalf("the cell was answered before it ran: %v", err)
		default:
		}
		for _, k := range n.pool.List() {
			if k.Owner == owner && k.Busy {
				return true
			}
		}
		return false
	})
}

func isNodeFailed(err error) bool {
	var ae *api.APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusBadGateway && ae.Code == api.CodeNodeFailed
}
