package rpcsock

import (
	"bufio"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// liveConns is how many connections s holds a slot for.
func liveConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// TestConnSlotsReleasedEveryRound: the connection cap is exhausted and
// released 25 times; each round the cap's worth of connections is
// served, one more is refused, and closing them gives every slot back
// (a slot kept by a closed or refused connection would refuse a later
// round's connections: the stub would degrade after many calls).
func TestConnSlotsReleasedEveryRound(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}, MaxConns: 2})
	end := s.BeginCell(&echo{}, 0)
	defer end()
	for round := range 25 {
		a, b := newClient(t, s), newClient(t, s)
		for _, cl := range []*client{a, b} {
			if got := cl.send(t, req("t", nil, s.Token())); got["result"] == "" {
				t.Fatalf("round %d: a connection within the cap: %v", round, got)
			}
		}
		over := newClient(t, s)
		_, _ = over.c.Write([]byte(req("t", nil, s.Token()) + "\n"))
		if line, err := bufio.NewReader(over.c).ReadString('\n'); err != nil || line != `{"error":"`+MsgTooManyConns+`"}`+"\n" {
			t.Fatalf("round %d: a connection over the cap: %q %v, want the refusal", round, line, err)
		}
		for _, cl := range []*client{a, b, over} {
			_ = cl.c.Close()
		}
		deadline := time.Now().Add(testenv.Patience)
		for liveConns(s) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d connection slots held after every connection closed", round, liveConns(s))
			}
			time.Sleep(time.Millisecond)
		}
	}
}
