package kernel

import (
	"sync"
	"sync/atomic"
)

// stderrRingSize is how much recent stderr a kernel keeps between cells, so a
// kernel that dies at start or between cells still says why.
const stderrRingSize = 8 << 10

// capBuf keeps the first cap bytes written to it and counts all of them.
type capBuf struct {
	b     []byte
	cap   int
	total int
}

func (c *capBuf) write(p []byte) {
	c.total += len(p)
	if room := c.cap - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
}

func (c *capBuf) reset() {
	c.b = c.b[:0]
	c.total = 0
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
type cellState struct {
	epoch atomic.Uint64

	mu        sync.Mutex
	n         int    // execution count of the active cell
	id        string // request id of the active cell
	gotFrame  bool
	gotMark   bool
	stdout    capBuf
	stderr    capBuf
	stderrLog ring
	dropped   int // fd-level stdout bytes that arrived between cells

	frames chan *wireReply // the active cell's reply (capacity 1)
	marks  chan struct{}   // the active cell's stderr is complete (capacity 1)
}

func newCellState(stdoutCap, stderrCap int) *cellState {
	return &cellState{
		stdout:    capBuf{cap: stdoutCap},
		stderr:    capBuf{cap: stderrCap},
		stderrLog: ring{buf: make([]byte, stderrRingSize)},
		frames:    make(chan *wireReply, 1),
		marks:     make(chan struct{}, 1),
	}
}

// begin makes cell n (request id) the active cell.
func (c *cellState) begin(n int, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.id = n, id
	c.gotFrame, c.gotMark = false, false
	c.stdout.reset()
	c.stderr.reset()
	c.epoch.Add(1)
}

// end deactivates the cell and returns its fd-level output and totals.
func (c *cellState) end() (stdout, stderr string, stdoutTotal int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.Load()%2 == 1 {
		c.epoch.Add(1)
	}
	stdout, stderr = string(c.stdout.b), string(c.stderr.b)
	stdoutTotal = c.stdout.total
	c.stdout.reset()
	c.stderr.reset()
	select { // a frame that raced a failed cell must not settle the next one
	case <-c.frames:
	default:
	}
	select {
	case <-c.marks:
	default:
	}
	return stdout, stderr, stdoutTotal
}

func (c *cellState) activeLocked(epoch uint64) bool {
	cur := c.epoch.Load()
	return cur%2 == 1 && epoch == cur
}

// rawStdout attributes fd-level stdout read during epoch.
func (c *cellState) rawStdout(p []byte, epoch uint64) {
	c.mu.Lock()
	if c.activeLocked(epoch) {
		c.stdout.write(p)
	} else {
		c.dropped += len(p)
	}
	c.mu.Unlock()
}

// droppedStdout counts fd-level stdout bytes dropped between cells.
func (c *cellState) droppedStdout() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// rawStderr records fd-level stderr: always in the ring, and in the cell's
// buffer when it was read while that cell ran.
func (c *cellState) rawStderr(p []byte, epoch uint64) {
	c.mu.Lock()
	c.stderrLog.write(p)
	if c.activeLocked(epoch) {
		c.stderr.write(p)
	}
	c.mu.Unlock()
}

// frame delivers a decoded reply to the active cell.
func (c *cellState) frame(r *wireReply) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.epoch.Load()%2 == 0:
		return protocolErr("reply frame while no cell runs")
	case c.gotFrame:
		return protocolErr("second reply frame for one cell")
	case r.ID != c.id:
		return protocolErr("reply frame for request " + quote(r.ID) + " while " + quote(c.id) + " runs")
	}
	c.gotFrame = true
	c.frames <- r
	return nil
}

// mark records the stderr end marker of cell n; stale or forged marks for
// other cells are ignored.
func (c *cellState) mark(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.Load()%2 == 1 && int64(c.n) == n && !c.gotMark {
		c.gotMark = true
		c.marks <- struct{}{}
	}
}

// stderrTail is the recent stderr of the kernel, for a DeathError.
func (c *cellState) stderrTail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderrLog.String()
}
