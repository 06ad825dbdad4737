package fleet_test

import (
	"context"
	"errors"
	"net/http"
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
