package kernel

import (
	"sync"
	"sync/atomic"
)

// stderrRingSize is how much recent stderr a kernel keeps between cells, so a
// kernel that dies at start or between cells still says why.
const stderrRingSize = 8 << 10

// capBuf keeps the first cap bytes written to it, the last tailCap bytes
// after those, and counts all of them. Its backing arrays never grow past
// cap and tailCap, and each growth is charged to acct; bytes the budget
// refuses are counted, not kept.
type capBuf struct {
	b       []byte
	cap     int
	total   int
	tail    ring
	tailCap int
	acct    *budget
}

// write returns the part of p it kept at the head (nil when none): what
// goes live to a streamed cell's sink.
func (c *capBuf) write(p []byte) []byte {
	c.total += len(p)
	room := c.cap - len(c.b)
	if room <= 0 {
		c.keepTail(p)
		return nil
	}
	rest := p[min(room, len(p)):]
	p = p[:min(room, len(p))]
	if need := len(c.b) + len(p); need > cap(c.b) {
		grown := min(max(2*cap(c.b), need, 4096), c.cap)
		if c.acct.charge(grown-cap(c.b)) != nil {
			return nil
		}
		c.b = append(make([]byte, 0, grown), c.b...)
	}
	c.b = append(c.b, p...)
	c.keepTail(rest)
	return p
}

// keepTail records bytes past the head in the tail ring, allocated (and
// charged) on first use.
func (c *capBuf) keepTail(p []byte) {
	if len(p) == 0 || c.tailCap <= 0 {
		return
	}
	if c.tail.buf == nil {
		if c.acct.charge(c.tailCap) != nil {
			return
		}
		c.tail.buf = make([]byte, c.tailCap)
	}
	c.tail.write(p)
}

// segment returns what the buffer kept.
func (c *capBuf) segment() segment {
	s := segment{head: string(c.b), total: c.total}
	if c.tail.buf != nil {
		s.tail = c.tail.String()
	}
	return s
}

// reset empties the buffer for the next cell; its memory goes back to the
// garbage collector (the previous cell's Reply may still use it).
func (c *capBuf) reset() {
	c.b = nil
	c.total = 0
	c.tail = ring{}
}

// ring keeps the last len(buf) bytes written to it.
type ring struct {
	buf  []byte
	next int
	full bool
}

func (r *ring) write(p []byte) {
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.next, r.full = 0, true
		return
	}
	n := copy(r.buf[r.next:], p)
	copy(r.buf, p[n:])
	if r.next+len(p) >= len(r.buf) {
		r.full = true
	}
	r.next = (r.next + len(p)) % len(r.buf)
}

func (r *ring) String() string {
	if !r.full {
		return string(r.buf[:r.next])
	}
	return string(r.buf[r.next:]) + string(r.buf[:r.next])
}

// cellState is what the output readers share with Exec: which cell is
// running (epoch odd = a cell is active), its output buffers, and the
// channels that settle it. Readers never block on it.
//
// A cell's fd-level output starts at the runner's begin marker for that
// cell on each stream, written after the runner flushed what earlier
// threads left in Python's buffers: bytes before it were written while no
// cell ran, and are dropped and counted, never delivered.
type cellState struct {
	epoch   atomic.Uint64
	dropped atomic.Int64 // fd-level bytes written while no cell ran
	acct    budget       // daemon memory held for the active cell

	mu        sync.Mutex
	n         int    // execution count of the active cell
	id        string // request id of the active cell
	gotFrame  bool
	gotMark   bool
	stdout    capBuf
	stderr    capBuf
	stderrLog ring
	outBegun  bool // the runner's begin marker for this cell arrived on stdout
	errBegun  bool // ... and on stderr

	// rep is the active cell's reply frame; settled carries it (capacity
	// 1, sent once) when the cell has both it and its stderr end mark: the
	// waiting Exec wakes once per cell, whichever reader completes the pair.
	rep     *wireReply
	settled chan *wireReply

	sink       func(Event) // the active cell's live events (nil: not streamed)
	displays   []Display   // the active cell's displays
	intr       chan struct{}
	intrSent   bool          // intr is closed
	helpers    []int         // the runner's own pids, as it sees them (H marks)
	errBegunCh chan struct{} // nil until begunCh; closed when errBegun is set
	started    bool          // the first cell's begin mark arrived on stderr: no more H marks
}

func newCellState(stdoutCap, stderrCap, tailCap int, limit int64) *cellState {
	c := &cellState{
		stderrLog: ring{buf: make([]byte, stderrRingSize)},
		settled:   make(chan *wireReply, 1),
	}
	c.acct.limit = limit
	c.stdout = capBuf{cap: stdoutCap, tailCap: tailCap, acct: &c.acct}
	c.stderr = capBuf{cap: stderrCap, tailCap: tailCap, acct: &c.acct}
	return c
}

// begin makes cell n (request id) the active cell; sink, when set,
// receives its output and displays as they arrive.
func (c *cellState) begin(n int, id string, sink func(Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.id = n, id
	c.sink, c.displays = sink, nil
	if c.intr == nil || c.intrSent { // one nobody closed serves the next cell
		c.intr = make(chan struct{})
	}
	c.intrSent = false
	c.errBegunCh = nil // made by begunCh, when an interrupt waits for it
	c.gotFrame, c.gotMark, c.rep = false, false, nil
	c.outBegun, c.errBegun = false, false
	c.stdout.reset()
	c.stderr.reset()
	c.acct.reset()
	c.epoch.Add(1)
}

// end deactivates the cell and returns its fd-level output and displays.
func (c *cellState) end() (stdout, stderr segment, displays []Display) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.Load()%2 == 1 {
		c.epoch.Add(1)
	}
	stdout, stderr = c.stdout.segment(), c.stderr.segment()
	displays, c.displays, c.sink = c.displays, nil, nil
	c.stdout.reset()
	c.stderr.reset()
	select { // a frame that raced a failed cell must not settle the next one
	case <-c.settled:
	default:
	}
	c.rep = nil
	return stdout, stderr, displays
}

func (c *cellState) activeLocked(epoch uint64) bool {
	cur := c.epoch.Load()
	return cur%2 == 1 && epoch == cur
}

// rawStdout attributes fd-level stdout read during epoch.
func (c *cellState) rawStdout(p []byte, epoch uint64) {
	c.mu.Lock()
	c.sendLocked(EventStdout, c.keepLocked(&c.stdout, c.outBegun, p, epoch))
}

// keepLocked adds p to buf when it was read while the cell of epoch ran
// and after its begin mark on that stream (begun), and returns what buf
// kept; anything else is counted as dropped.
func (c *cellState) keepLocked(buf *capBuf, begun bool, p []byte, epoch uint64) []byte {
	if c.activeLocked(epoch) && begun {
		return buf.write(p)
	}
	c.dropped.Add(int64(len(p)))
	return nil
}

// sendLocked hands what a stream kept to the cell's sink, outside the lock
// (a slow client must not stall the other stream's reader), and unlocks.
func (c *cellState) sendLocked(kind EventKind, kept []byte) {
	sink := c.sink
	c.mu.Unlock()
	if sink != nil && len(kept) > 0 {
		sink(Event{Kind: kind, Data: append([]byte(nil), kept...)})
	}
}

// rawStderr records fd-level stderr: always in the ring (a kernel that
// dies between cells still says why), and in the cell's buffer when it was
// written while that cell ran; otherwise it is counted as dropped.
func (c *cellState) rawStderr(p []byte, epoch uint64) {
	c.mu.Lock()
	c.stderrLog.write(p)
	c.sendLocked(EventStderr, c.keepLocked(&c.stderr, c.errBegun, p, epoch))
}

// begun records the runner's begin marker of cell n on stdout (or stderr):
// from here on that stream's bytes belong to the cell. Markers for other
// cells (stale or forged) change nothing.
func (c *cellState) begun(stderr bool, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = c.started || stderr
	if c.epoch.Load()%2 == 0 || int64(c.n) != n {
		return
	}
	if stderr {
		if !c.errBegun && c.errBegunCh != nil {
			close(c.errBegunCh)
		}
		c.errBegun = true
	} else {
		c.outBegun = true
	}
}

// wantsFrame reports whether a reply frame may come now: a cell runs and
// has none yet. Checked from the header, before any of the body is read.
func (c *cellState) wantsFrame() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frameRefusedLocked()
}

func (c *cellState) frameRefusedLocked() error {
	switch {
	case c.epoch.Load()%2 == 0:
		return protocolErr("reply frame while no cell runs")
	case c.gotFrame:
		return protocolErr("second reply frame for one cell")
	}
	return nil
}

// frame delivers a decoded reply to the active cell.
func (c *cellState) frame(r *wireReply) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.frameRefusedLocked(); err != nil {
		return err
	}
	if r.ID != c.id {
		return protocolErr("reply frame for request " + quote(r.ID) + " while " + quote(c.id) + " runs")
	}
	c.gotFrame, c.rep = true, r
	if c.gotMark || r.StderrClosed {
		c.settled <- r
	}
	return nil
}

// frameUnsettled is the active cell's reply frame when it came without
// its end mark (the kernel died between the two), nil otherwise.
func (c *cellState) frameUnsettled() *wireReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rep
}

// mark records the stderr end marker of cell n; stale or forged marks for
// other cells are ignored.
func (c *cellState) mark(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.Load()%2 == 1 && int64(c.n) == n && !c.gotMark {
		c.gotMark = true
		if c.gotFrame && !c.rep.StderrClosed { // else frame settled the cell
			c.settled <- c.rep
		}
	}
}

// stderrTail is the recent stderr of the kernel, for a DeathError.
func (c *cellState) stderrTail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderrLog.String()
}
