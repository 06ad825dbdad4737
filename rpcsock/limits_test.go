package rpcsock

import (
	"context"
	"testing"
)

// TestCloseUnblocksReadsAndHandlers: Close returns with a connection parked
// in a read and another waiting on a handler; goleak (TestMain) proves no
// goroutine survives.
func TestCloseUnblocksReadsAndHandlers(t *testing.T) {
	s, err := Listen(Config{Dir: privateDir(t), UID: -1, Tools: []string{"t"}, Network: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	s.BeginCell(HandlerFunc(func(ctx context.Context, _ Call) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}), 0)
	_ = newClient(t, s)
	busy := newClient(t, s)
	if _, err := busy.c.Write([]byte(req("t", nil, s.Token()) + "\n")); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if end := s.BeginCell(&echo{}, 0); end() != 0 {
		t.Fatal("a cell begun after Close must dispatch nothing")
	}
}
