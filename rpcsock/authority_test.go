package rpcsock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// named answers with its own name, so a test sees which cell's handler ran.
type named string

func (n named) HandleTool(context.Context, pool.ToolCall) (string, error) { return string(n), nil }

// TestLaterCellReachesLaterHandler: the same connection (as a kernel keeps
// it across cells) dispatches each cell's calls to that cell's handler only.
func TestLaterCellReachesLaterHandler(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}})
	cl := newClient(t, s)
	for i := range 3 {
		name := fmt.Sprintf("cell-%d", i)
		end := s.BeginCell(named(name), 0)
		for range 2 {
			if got := cl.send(t, req("t", nil, s.Token())); got["result"] != name {
				t.Fatalf("cell %d: got %v, want result %q", i, got, name)
			}
		}
		if n := end(); n != 2 {
			t.Fatalf("cell %d: callsMade = %d, want 2", i, n)
		}
		if n := end(); n != 2 {
			t.Fatalf("cell %d: second end() = %d, want 2 (idempotent)", i, n)
		}
	}
}

// TestBackgroundCallAfterSettleRefused: a thread the cell left running keeps
// its connection; once the cell settled its calls are refused, and a new
// cell's budget/handler is not reachable through the old cell's count.
func TestBackgroundCallAfterSettleRefused(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}})
	first := &echo{}
	end := s.BeginCell(first, 0)
	bg := newClient(t, s) // the background thread's connection
	if got := bg.send(t, req("t", nil, s.Token())); got["error"] != "" {
		t.Fatalf("during cell: %v", got)
	}
	end()
	if got := bg.send(t, req("t", nil, s.Token())); got["error"] != MsgNoActiveCell {
		t.Fatalf("after settle: %v, want %q", got, MsgNoActiveCell)
	}
	if first.calls.Load() != 1 {
		t.Fatalf("first handler calls = %d, want 1", first.calls.Load())
	}
}

// TestSettleCancelsRunningCall: a call still running when its cell settles
// sees its context canceled and the cell gets MsgCellSettled.
func TestSettleCancelsRunningCall(t *testing.T) {
	s := listen(t, Config{Tools: []string{"slow"}})
	started := make(chan struct{})
	h := pool.ToolHandlerFunc(func(ctx context.Context, _ pool.ToolCall) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	end := s.BeginCell(h, 0)
	cl := newClient(t, s)
	reply := make(chan map[string]string, 1)
	go func() {
		m, err := cl.trySend(req("slow", nil, s.Token()))
		if err != nil {
			m = map[string]string{"error": err.Error()}
		}
		reply <- m
	}()
	<-started
	if n := end(); n != 1 {
		t.Errorf("callsMade = %d, want 1 (a running call was dispatched)", n)
	}
	if got := <-reply; got["error"] != MsgCellSettled {
		t.Fatalf("got %v, want %q", got, MsgCellSettled)
	}
}

// TestHandlerErrorAndPanic: errors reach the cell as error lines; a panic
// is contained; both count as dispatched.
func TestHandlerErrorAndPanic(t *testing.T) {
	s := listen(t, Config{Tools: []string{"fail", "panic"}})
	h := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		if c.Tool == "panic" {
			panic("boom")
		}
		return "", errors.New("search backend unavailable")
	})
	end := s.BeginCell(h, 0)
	cl := newClient(t, s)
	if got := cl.send(t, req("fail", nil, s.Token())); got["error"] != "search backend unavailable" {
		t.Fatalf("got %v", got)
	}
	if got := cl.send(t, req("panic", nil, s.Token())); got["error"] != errHandlerPanic.Error() {
		t.Fatalf("got %v", got)
	}
	if got := cl.send(t, req("fail", nil, s.Token())); got["error"] == "" {
		t.Fatalf("connection must survive a panic, got %v", got)
	}
	if n := end(); n != 3 {
		t.Fatalf("callsMade = %d, want 3", n)
	}
}

func TestNilHandlerRefuses(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}})
	end := s.BeginCell(nil, 5)
	cl := newClient(t, s)
	if got := cl.send(t, req("t", nil, s.Token())); got["error"] != MsgNoHandler {
		t.Fatalf("got %v", got)
	}
	if n := end(); n != 0 {
		t.Fatalf("callsMade = %d, want 0", n)
	}
}

// TestConcurrentConnectionsShareBudget: threads of one cell on separate
// connections each get their own reply; the budget holds across them.
func TestConcurrentConnectionsShareBudget(t *testing.T) {
	const conns, perConn, budget = 8, 10, 50
	s := listen(t, Config{Tools: []string{"t"}, MaxConns: conns})
	h := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) { return string(c.Args), nil })
	end := s.BeginCell(h, budget)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, limited := 0, 0
	errs := make(chan error, conns*perConn)
	for i := range conns {
		cl := newClient(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perConn {
				want := fmt.Sprintf(`{"c":%d,"j":%d}`, i, j)
				got, err := cl.trySend(req("t", map[string]int{"c": i, "j": j}, s.Token()))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				switch {
				case got["result"] == want:
					ok++
				case got["error"] == LimitMessage(budget):
					limited++
				default:
					errs <- fmt.Errorf("conn %d call %d: got %v want %s", i, j, got, want)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ok != budget || limited != conns*perConn-budget {
		t.Errorf("ok=%d limited=%d, want %d and %d", ok, limited, budget, conns*perConn-budget)
	}
	if n := end(); n != budget {
		t.Errorf("callsMade = %d, want %d", n, budget)
	}
}

func TestBeginCellReplacesActiveCell(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}})
	cl := newClient(t, s)
	end1 := s.BeginCell(named("one"), 0)
	cl.send(t, req("t", nil, s.Token()))
	end2 := s.BeginCell(named("two"), 0)
	if got := cl.send(t, req("t", nil, s.Token())); got["result"] != "two" {
		t.Fatalf("got %v", got)
	}
	if end1() != 1 || end2() != 1 {
		t.Fatal("counts must stay per cell")
	}
}

func TestCallIDsUnique(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}})
	ids := make(chan string, 10)
	end := s.BeginCell(pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		ids <- c.ID
		return "", nil
	}), 0)
	defer end()
	cl := newClient(t, s)
	for range 10 {
		// send returns after the reply, so the handler has run.
		cl.send(t, req("t", nil, s.Token()))
	}
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] || id == "" {
			t.Fatalf("duplicate or empty id %q", id)
		}
		seen[id] = true
	}
	if len(seen) != 10 {
		t.Fatalf("handler saw %d calls, want 10", len(seen))
	}
}
