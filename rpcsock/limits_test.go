package rpcsock

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestCloseUnblocksReadsAndHandlers: Close returns promptly (well inside the
// hour-long idle timeout) with a connection parked in a read and another
// waiting on a handler: the handler sees its context canceled and both
// peers see their connection end. goleak (TestMain) proves no goroutine
// survives.
func TestCloseUnblocksReadsAndHandlers(t *testing.T) {
	s, err := Listen(Config{Dir: privateDir(t), UID: -1, Tools: []string{"t"}, Network: "tcp", IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	started, handlerDone := make(chan struct{}), make(chan struct{})
	s.BeginCell(pool.ToolHandlerFunc(func(ctx context.Context, _ pool.ToolCall) (string, error) {
		close(started)
		<-ctx.Done()
		close(handlerDone)
		return "", ctx.Err()
	}), 0)
	idle := newClient(t, s)
	busy := newClient(t, s)
	if _, err := busy.c.Write([]byte(req("t", nil, s.Token()) + "\n")); err != nil {
		t.Fatal(err)
	}
	<-started
	serverSide := trackedConns(t, s, 2)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close closes the connections before it cancels its base context, so
	// once that is canceled both server ends must be closed: checked at
	// once instead of waiting out a Close that a parked read holds.
	select {
	case <-s.baseCtx.Done():
	case <-time.After(testenv.Patience):
		t.Fatal("Close did not cancel the server's context")
	}
	for i, c := range serverSide {
		if err := c.SetReadDeadline(time.Time{}); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("server end of connection %d still open after Close canceled the server's context (%v)", i, err)
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("Close still blocked: a parked read or handler holds it")
	}
	select {
	case <-handlerDone:
	default:
		t.Fatal("Close returned before the busy handler saw its context canceled")
	}
	for name, cl := range map[string]*client{"idle": idle, "busy": busy} {
		_ = cl.c.SetReadDeadline(time.Now().Add(testenv.Patience))
		if _, err := io.ReadAll(cl.r); err != nil {
			t.Errorf("%s connection not closed by Close: %v", name, err)
		}
	}
	if end := s.BeginCell(&echo{}, 0); end() != 0 {
		t.Fatal("a cell begun after Close must dispatch nothing")
	}
}

// TestMemoryBudgetDropsConnection: two connections' unfinished lines (past
// the fixed 64 KiB read buffer) share one budget; the one whose line would
// pass it gets MsgOverBudget and is closed, the other finishes its line and
// is served, and the budget is free again afterwards.
func TestMemoryBudgetDropsConnection(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}, MaxLineBytes: 400_000, MemoryBudget: 600_000})
	end := s.BeginCell(&echo{}, 0)
	defer end()
	a, b := newClient(t, s), newClient(t, s)
	full := req("t", map[string]string{"q": strings.Repeat("a", 300_000)}, s.Token())
	half := len(full) - 10
	if _, err := a.c.Write([]byte(full[:half])); err != nil {
		t.Fatal(err)
	}
	// a holds 262,144 bytes once four full 64 KiB reads of it arrived.
	waitUntil(t, func() bool { return s.mem.held.Load() == 262_144 })
	// b's fifth 64 KiB read needs its line to grow to 400,001 bytes:
	// 662,145 in all, over the 600,000 budget.
	// The daemon may drop b before its whole line is written: EPIPE is the
	// expected end of that write, and the refusal line is still queued.
	if _, err := b.c.Write([]byte(req("t", map[string]string{"q": strings.Repeat("b", 350_000)}, s.Token()))); err != nil && !errors.Is(err, syscall.EPIPE) {
		t.Fatal(err)
	}
	if line, err := b.r.ReadString('\n'); err != nil || line != `{"error":"`+MsgOverBudget+`"}`+"\n" {
		t.Fatalf("b: %q %v, want the over-budget refusal", line, err)
	}
	if _, err := b.r.ReadString('\n'); err == nil {
		t.Fatal("b still open after the refusal")
	}
	got, err := a.trySend(full[half:])
	if err != nil || got["result"] == "" {
		t.Fatalf("a: %v %v", got, err)
	}
	if n := s.overBudget.Load(); n != 1 {
		t.Fatalf("%d connections dropped over the budget, want 1", n)
	}
	if _, err := a.c.Write([]byte("\n\n")); err != nil { // keep-alives hold nothing either
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return s.mem.held.Load() == 0 })
}

// trackedConns waits until s tracks n connections and returns their server
// ends.
func trackedConns(t *testing.T, s *Server, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	waitUntil(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		conns = conns[:0]
		for c := range s.conns {
			conns = append(conns, c)
		}
		return len(conns) == n
	})
	return conns
}

// waitUntil polls cond (tests only) for up to 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(testenv.Patience); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
