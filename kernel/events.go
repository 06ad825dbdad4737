package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// EventKind names a live event of a streamed cell.
type EventKind string

// The live events of a cell, in the order the kernel produced them on
// each stream.
const (
	EventStdout  EventKind = "stdout"
	EventStderr  EventKind = "stderr"
	EventDisplay EventKind = "display"
)

// Event is one piece of a running cell's output: raw bytes (a copy, not
// yet cleaned or redacted) or a display.
type Event struct {
	Kind    EventKind
	Data    []byte
	Display *Display
}

// Display is one rich display: mime type to value (base64 for binary
// types, a string for text types, any JSON for application/json) and
// metadata, as IPython's display_data message carries them.
type Display struct {
	Data     map[string]json.RawMessage `json:"data"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// Bounds on one display's shape (its bytes are bounded by DisplayBytes).
const (
	maxDisplayMimes = 32
	maxMimeLen      = 128
)

// decodeDisplay reads a D frame's body of n bytes (n <= DisplayBytes,
// checked by the caller), charging it to acct.
func decodeDisplay(r io.Reader, n int64, acct *budget) (*Display, error) {
	// Charged for the cell (the decoded display is kept until it ends).
	if err := acct.charge(int(n)); err != nil {
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("read display: %w", err)
	}
	var d Display
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil || dec.More() {
		return nil, protocolErr("display frame is not one JSON object")
	}
	if len(d.Data) == 0 || len(d.Data) > maxDisplayMimes || len(d.Metadata) > maxDisplayMimes {
		return nil, protocolErr(fmt.Sprintf("a display needs 1 to %d mime types", maxDisplayMimes))
	}
	for mime := range d.Data {
		if len(mime) > maxMimeLen || !utf8.ValidString(mime) {
			return nil, protocolErr("display has an over-long or invalid mime type")
		}
	}
	return &d, nil
}

// display records a decoded display for the active cell and streams it.
func (c *cellState) display(d *Display) {
	c.mu.Lock()
	var sink func(Event)
	if c.epoch.Load()%2 == 1 && c.outBegun {
		c.displays = append(c.displays, *d)
		sink = c.sink
	}
	c.mu.Unlock()
	if sink != nil {
		sink(Event{Kind: EventDisplay, Display: d})
	}
}

// maxHelpers bounds the runner's H marks kept (the runner, its watchdog).
const maxHelpers = 4

// helper records one of the runner's own pids, announced before the first
// cell (no user code ran yet, so nothing can forge it).
func (c *cellState) helper(pid int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started && len(c.helpers) < maxHelpers && pid > 0 && pid < 1<<31 {
		c.helpers = append(c.helpers, int(pid))
	}
}

func (c *cellState) helperPids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.helpers...)
}

// begunCh is closed once the active cell's begin mark arrived on stderr:
// the runner then holds a SIGINT for the cell (it forgets earlier ones when
// it writes the mark) and has named its helpers (H marks come first).
func (c *cellState) begunCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errBegunCh == nil {
		c.errBegunCh = make(chan struct{})
		if c.errBegun {
			close(c.errBegunCh)
		}
	}
	return c.errBegunCh
}

// interruptRequested returns the active cell's interrupt channel, closed
// by requestInterrupt.
func (c *cellState) interruptRequested() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.intr
}

// requestInterrupt asks the active cell to stop; false when none runs.
func (c *cellState) requestInterrupt() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.Load()%2 == 0 {
		return false
	}
	if !c.intrSent {
		c.intrSent = true
		close(c.intr)
	}
	return true
}
