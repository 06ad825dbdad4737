package pool

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kernpool/kernpool/kernel"
)

// Display is one rich display of a cell (see kernel.Display); text mime
// types are cleaned and redacted like output.
type Display = kernel.Display

// Variable and Variables are a kernel's namespace listing (see
// kernel.Variables).
type (
	Variable  = kernel.Variable
	Variables = kernel.Variables
)

// EventKind names a live event of a streamed cell.
type EventKind = kernel.EventKind

// The kinds of live events (the API adds tool_call and result).
const (
	EventStdout  = kernel.EventStdout
	EventStderr  = kernel.EventStderr
	EventDisplay = kernel.EventDisplay
)

// Event is one live event of a streamed cell, cleaned and redacted: Text
// for stdout and stderr, Display for a display.
type Event struct {
	Kind    EventKind
	Text    string
	Display *Display
}

// Streaming bounds.
const (
	// streamMaxHold bounds the partial line a stream holds back (a secret
	// cut across two chunks sits in one line, so whole lines are sent);
	// past it, all but the last streamWindow bytes are sent.
	streamMaxHold = 64 << 10
	// streamWindow is the tail kept back from an over-long line, so that a
	// secret of up to this many bytes cut at the border is still masked.
	streamWindow = 8 << 10
	// streamPartialAfter: a partial line (no newline yet, no open key
	// block) that got no more bytes for this long is sent as it is, so
	// `print(x, end='')` reaches the client while the cell runs. A secret
	// printed in two parts this far apart without a newline between them is
	// streamed unmasked (the result is unaffected).
	streamPartialAfter = 200 * time.Millisecond
)

// pemBegin starts a private key block, masked whole by the redactor: a
// block still open is held back until its end arrives.
const pemBegin = "-----BEGIN "

// inlineCapper is implemented by filters that know their inline caps
// (envscrub.Filter); without it streaming sends everything the kernel kept.
type inlineCapper interface {
	InlineCaps() (stdout, stderr int)
}

// streamer turns a kernel's raw live events into cleaned events: per
// stream it holds back the partial last line and sends complete lines only
// when cleaning them alone gives the same text as cleaning them with what
// follows (no mask or ANSI sequence crosses the cut); it sends at most the
// inline cap.
type streamer struct {
	filter cleaner
	emit   func(Event)

	mu      sync.Mutex
	pending [2][]byte
	room    [2]int // inline bytes left per stream
	capped  [2]bool
	// partial sends a held partial line after partialAfter without new
	// bytes (0: never; tests of the cut logic); one timer per stream.
	partialAfter time.Duration
	partial      [2]*time.Timer
	closed       bool
}

// cleaner is the part of OutputFilter streaming uses.
type cleaner interface{ Clean(text string) string }

func newStreamer(filter cleaner, emit func(Event)) *streamer {
	s := &streamer{filter: filter, emit: emit, room: [2]int{1 << 62, 1 << 62}, partialAfter: streamPartialAfter}
	if c, ok := filter.(inlineCapper); ok {
		s.room[0], s.room[1] = c.InlineCaps()
	}
	return s
}

// add takes one raw kernel event (from either reader goroutine).
func (s *streamer) add(e kernel.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if e.Kind == kernel.EventDisplay {
		s.flushLocked(0, true) // the output before it goes first
		d := cleanDisplay(s.filter, *e.Display)
		s.emit(Event{Kind: EventDisplay, Display: &d})
		return
	}
	i := streamIndex(e.Kind)
	if s.capped[i] {
		return // past the inline cap nothing more is sent (the result has it)
	}
	s.pending[i] = append(s.pending[i], e.Data...)
	s.flushLocked(i, false)
	if len(s.pending[i]) > 0 && s.partialAfter > 0 {
		if s.partial[i] == nil {
			s.partial[i] = time.AfterFunc(s.partialAfter, func() { s.sendPartial(i) })
		} else {
			s.partial[i].Reset(s.partialAfter)
		}
	}
}

// sendPartial sends stream i's held partial line once no bytes came for
// partialAfter; an open private-key block stays held until its end.
func (s *streamer) sendPartial(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[i]
	if s.closed || s.capped[i] || len(p) == 0 || bytes.Contains(p, []byte(pemBegin)) {
		return
	}
	s.pending[i] = nil
	s.send(i, s.filter.Clean(string(p)))
}

// finish sends what is held back; later events are dropped.
func (s *streamer) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(0, true)
	s.flushLocked(1, true)
	s.closed = true
	for _, t := range s.partial {
		if t != nil {
			t.Stop()
		}
	}
}

func streamIndex(k kernel.EventKind) int {
	if k == kernel.EventStderr {
		return 1
	}
	return 0
}

// flushLocked sends the clean prefix of stream i (all of it when final):
// the complete lines, when cleaning them alone gives the same text as
// cleaning them with what follows (no mask or ANSI sequence crosses the
// cut).
func (s *streamer) flushLocked(i int, final bool) {
	p := s.pending[i]
	if len(p) == 0 {
		return
	}
	if final {
		s.pending[i] = nil
		s.send(i, s.filter.Clean(string(p)))
		return
	}
	cut := cutPoint(p)
	if cut <= 0 {
		return
	}
	head := s.filter.Clean(string(p[:cut]))
	// The check cleans from a line start at least streamWindow before the
	// cut (not all of p): masks are shorter than that, private key blocks
	// are held whole by cutPoint.
	lo := max(cut-streamWindow, 0)
	if lo > 0 {
		lo = bytes.LastIndexByte(p[:lo], '\n') + 1
	}
	if !strings.HasPrefix(s.filter.Clean(string(p[lo:])), s.filter.Clean(string(p[lo:cut]))) && len(p) <= 4*streamMaxHold {
		return // something crosses the cut: wait for more
	}
	s.pending[i] = append(p[:0:0], p[cut:]...)
	s.send(i, head)
}

// cutPoint is where to split p: after its last newline, before a private
// key block still open; in an over-long line, streamWindow bytes before
// the end (on a character boundary).
func cutPoint(p []byte) int {
	cut := bytes.LastIndexByte(p, '\n') + 1
	if b := bytes.LastIndex(p[:cut], []byte(pemBegin)); b >= 0 && !bytes.Contains(p[b:], []byte("-----END ")) {
		cut = b
	}
	if len(p)-cut > streamMaxHold {
		cut = len(p) - streamWindow
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
	}
	return cut
}

// send emits text within the stream's inline cap.
func (s *streamer) send(i int, text string) {
	if s.capped[i] || text == "" {
		return
	}
	if len(text) > s.room[i] {
		cut := s.room[i]
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "\n[stream capped: the rest is in the result (and its spill file)]\n"
		s.capped[i] = true
	}
	s.room[i] -= len(text)
	kind := EventStdout
	if i == 1 {
		kind = EventStderr
	}
	s.emit(Event{Kind: kind, Text: text})
}

// cleanDisplay redacts the text mime types of d (binary ones are base64
// and not text), and its metadata, which the cell writes as freely.
func cleanDisplay(f cleaner, d Display) Display {
	out := Display{Data: make(map[string]json.RawMessage, len(d.Data)), Metadata: cleanMetadata(f, d.Metadata)}
	for mime, raw := range d.Data {
		var text string
		if isTextMime(mime) && json.Unmarshal(raw, &text) == nil {
			if b, err := json.Marshal(f.Clean(text)); err == nil {
				raw = b
			}
		} else if !isBinaryMime(mime) {
			// application/json and the like: redacted as text, kept as JSON
			// when that still parses.
			clean := f.Clean(string(raw))
			if json.Valid([]byte(clean)) {
				raw = json.RawMessage(clean)
			} else if b, err := json.Marshal(clean); err == nil {
				raw = b
			}
		}
		out.Data[mime] = raw
	}
	return out
}

// cleanMetadata redacts every string (keys too) of a display's metadata,
// decoded, so that a value JSON escapes is still seen whole; a value that
// does not decode is redacted as text and kept as a JSON string.
func cleanMetadata(f cleaner, meta map[string]json.RawMessage) map[string]json.RawMessage {
	if meta == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(meta))
	for k, raw := range meta {
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var b []byte
		err := d.Decode(&v)
		if err == nil {
			b, err = json.Marshal(cleanJSONValue(f, v))
		}
		if err != nil {
			b, _ = json.Marshal(f.Clean(string(raw)))
		}
		out[f.Clean(k)] = b
	}
	return out
}

// cleanJSONValue redacts the strings of a decoded JSON value.
func cleanJSONValue(f cleaner, v any) any {
	switch v := v.(type) {
	case string:
		return f.Clean(v)
	case []any:
		for i := range v {
			v[i] = cleanJSONValue(f, v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[f.Clean(k)] = cleanJSONValue(f, e)
		}
		return out
	}
	return v
}

func isBinaryMime(m string) bool {
	return strings.HasPrefix(m, "image/") && m != "image/svg+xml"
}

func isTextMime(m string) bool {
	return strings.HasPrefix(m, "text/") || m == "image/svg+xml"
}
