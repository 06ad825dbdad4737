package pool

import "testing"

// SessionOwner is what the API checks a caller's credential against before
// anything else about a session: it must name each live session's own
// owner, and no owner at all for an id that is no session.
func TestSessionOwnerNamesEachSessionsOwner(t *testing.T) {
	p := newTestPool(t)
	ids := map[string]string{}
	for _, owner := range []string{"alice", "bob"} {
		info, err := p.CreateSession(SessionSpec{Owner: owner})
		if err != nil {
			t.Fatalf("CreateSession(%s): %v", owner, err)
		}
		ids[owner] = info.ID
	}
	for _, owner := range []string{"alice", "bob"} {
		if got, ok := p.SessionOwner(ids[owner]); got != owner || !ok {
			t.Errorf("SessionOwner(%s's session) = %q, %v; want %q, true", owner, got, ok, owner)
		}
	}
	for _, id := range []string{"", "s00000000000000000000000000000000", "k1"} {
		if got, ok := p.SessionOwner(id); got != "" || ok {
			t.Errorf("SessionOwner(%q) = %q, %v; want \"\", false", id, got, ok)
		}
	}
}
