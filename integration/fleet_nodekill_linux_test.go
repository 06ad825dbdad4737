//go:build integration && linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestFleetSessionNodeKilledMidCell: kill -9 of the node that runs a
// session's cell, sent through a router: the cell is answered 502
// node_failed (the node is gone), as an owner's cell on a dead node is,
// never 404 not_found from the node that never held the session; a
// streamed cell killed after its first event ends with the error event
// node_failed.
func TestFleetSessionNodeKilledMidCell(t *testing.T) {
	f := newFleetRig(t, "1h", "")
	f.node("k1", 61600)
	f.node("k2", 61800)
	f.waitNodes(2)
	u, _ := f.router()
	c := f.client(u)
	ctx := context.Background()

	s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "1"})
	if err != nil || first.Status != pool.StatusSuccess {
		t.Fatalf("the session's first cell: %+v, %v", first, err)
	}
	n := f.nodes[f.record("o").Node]
	direct := f.client(n.url)
	answered := make(chan error, 1)
	go func() {
		_, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "import time\nwhile True:\n    time.sleep(0.05)"})
		answered <- err
	}()
	waitFor(t, scaled(testenv.Patience), "the session's cell to run", func() bool {
		select {
		case err := <-answered:
			t.Fatalf("the cell was answered before it ran: %v", err)
		default:
		}
		ks, err := direct.List(ctx)
		if err != nil {
			return false
		}
		for _, k := range ks {
			if k.ID == first.Kernel.ID && k.Busy {
				return true
			}
		}
		return false
	})
	pid := n.d.Pid()
	n.d.Signal(syscall.SIGKILL)
	waitFor(t, scaled(testenv.Patience), fmt.Sprintf("node pid %d to die", pid), func() bool { return procDead(pid) })
	err = <-answered
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadGateway || ae.Code != api.CodeNodeFailed {
		t.Fatalf("the session cell whose node was killed: %v, want 502 %s", err, api.CodeNodeFailed)
	}
	// The node comes back on its state dir and ends the kernel its
	// killed run left behind.
	n.d.Restart(n.opts)

	// A streamed cell has sent its status line with its first event:
	// killed after that, its node's cell ends with the error event
	// node_failed through the router, after the events that came.
	streamed := make(chan error, 1)
	firstEv := make(chan string, 1)
	go func() {
		_, err := c.ExecuteLive(ctx, pool.Request{Owner: "o", Code: "print('first')\nimport time\nwhile True:\n    time.sleep(0.05)"}, nil,
			func(ev api.Event) {
				if ev.Event == api.EventStdout {
					select {
					case firstEv <- ev.Text:
					default:
					}
				}
			})
		streamed <- err
	}()
	select {
	case text := <-firstEv:
		if text != "first\n" {
			t.Fatalf("the streamed cell's first event: %q", text)
		}
	case err := <-streamed:
		t.Fatalf("the streamed cell ended before its first event: %v", err)
	}
	n = f.nodes[f.record("o").Node]
	pid = n.d.Pid()
	n.d.Signal(syscall.SIGKILL)
	waitFor(t, scaled(testenv.Patience), fmt.Sprintf("node pid %d to die", pid), func() bool { return procDead(pid) })
	if err := <-streamed; !errors.As(err, &ae) || ae.Code != api.CodeNodeFailed {
		t.Fatalf("the streamed cell whose node was killed: %v, want the error event %s", err, api.CodeNodeFailed)
	}
	n.d.Restart(n.opts)
}

// procDead: /proc/PID/status is gone, or says the process is a zombie
// or dead (it runs no more code).
func procDead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "State:"); ok {
			st := strings.TrimSpace(rest)
			return strings.HasPrefix(st, "Z") || strings.HasPrefix(st, "X")
		}
	}
	return false
}
