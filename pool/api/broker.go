package api

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// broker holds the streamed tool calls that await their answer, by id.
type broker struct {
	mu      sync.Mutex
	pending map[string]chan ToolAnswer
}

func newBroker() *broker {
	return &broker{pending: map[string]chan ToolAnswer{}}
}

// add registers a call and returns its id (want, unless empty or taken,
// in which case a fresh random id) and the channel its answer arrives on.
func (b *broker) add(want string) (string, chan ToolAnswer) {
	ch := make(chan ToolAnswer, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	id := want
	for id == "" || b.pending[id] != nil {
		id = randomID()
	}
	b.pending[id] = ch
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
func (b *broker) answer(id string, a ToolAnswer) bool {
	b.mu.Lock()
	ch := b.pending[id]
	delete(b.pending, id)
	b.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- a // buffered 1, and only one sender ever gets ch
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
