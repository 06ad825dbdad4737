package api

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// broker holds the streamed tool calls that await their answer, by id.
type broker struct {
	mu      sync.Mutex
	pending map[string]pendingCall
}

// pendingCall is one call awaiting its answer, and who may answer it.
type pendingCall struct {
	answer chan ToolAnswer
	by     *Principal
}

func newBroker() *broker {
	return &broker{pending: map[string]pendingCall{}}
}

// add registers a call and returns its id (want, unless empty or taken,
// in which case a fresh random id) and the channel its answer arrives on.
// Only by (the principal whose request runs the cell) or an admin may
// answer it: a kernel chooses its call ids, so another network client
// could guess them.
func (b *broker) add(want string, by *Principal) (string, chan ToolAnswer) {
	ch := make(chan ToolAnswer, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	id := want
	for {
		if _, taken := b.pending[id]; id != "" && !taken {
			break
		}
		id = randomID()
	}
	b.pending[id] = pendingCall{answer: ch, by: by}
	return id, ch
}

// remove forgets a call (answered, timed out or its cell ended).
func (b *broker) remove(id string) {
	b.mu.Lock()
	delete(b.pending, id)
	b.mu.Unlock()
}

// answer delivers a to the call id; false if no such call is pending.
// A call is answered at most once: the first answer removes it.
// A call another principal may not answer is reported absent and stays
// pending.
func (b *broker) answer(id string, a ToolAnswer, by *Principal) bool {
	b.mu.Lock()
	pc, ok := b.pending[id]
	if ok && by != pc.by && (by == nil || !by.Admin) {
		ok = false
	}
	if ok {
		delete(b.pending, id)
	}
	b.mu.Unlock()
	if !ok {
		return false
	}
	pc.answer <- a // buffered 1, and only one sender ever gets it
	return true
}

func (b *broker) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// randomID returns "t" + 16 hex digits; unguessable, so one socket user
// cannot answer another's calls by counting.
func randomID() string {
	var buf [8]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "t" + hex.EncodeToString(buf[:])
}
