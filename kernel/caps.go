package kernel

import (
	"cmp"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/kernpool/kernpool/units"
)

// The runner's caps and the frame limit derived from them. Each is
// defined here once: the runner receives the first two on EnvOutputCaps,
// and the daemon's decoder enforces the same figures again, so a kernel
// that forges a frame gets no more daemon memory than an honest one.
const (
	// CaptureChars is the runner's cap on one cell's Python-level stdout
	// and stderr, in characters (parity §2: 1,000,000).
	CaptureChars = 1_000_000
	// TracebackBytes caps the traceback (and a SystemExit message) the
	// runner reports, in UTF-8 bytes, notice included: head 40 %, the
	// reference's truncation notice, tail 60 %.
	TracebackBytes = 64 << 10

	// maxEscapedPerChar: the runner's JSON escaping writes at most 6 bytes
	// for one character (a control character as \u00XX); non-ASCII stays
	// raw UTF-8 (at most 4 bytes).
	maxEscapedPerChar = 6
	// maxDecodedPerChar: one decoded character takes at most 4 bytes of
	// UTF-8 (a lone surrogate becomes U+FFFD, 3 bytes).
	maxDecodedPerChar = 4
	// frameOverhead covers member names, the id, status, numbers, booleans
	// and the separators of one frame.
	frameOverhead = 4 << 10
	// smallFieldBytes caps a frame's id, status and member names.
	smallFieldBytes = 64

	// DisplayBytes caps one display's JSON (a D frame's body) and
	// DisplayCellBytes all of one cell's; the runner drops (and counts)
	// a display that would pass either, the daemon refuses a bigger D frame.
	DisplayBytes     = 4 << 20
	DisplayCellBytes = 4 << 20

	// DefaultMaxFrameBytes is the largest reply frame an honest runner
	// writes: stdout and stderr at CaptureChars each, fully escaped, plus
	// the traceback and the overhead (about 12.4 MB). Displays travel in
	// D frames of their own (at most DisplayBytes each) and add
	// DisplayCellBytes to Budget.
	DefaultMaxFrameBytes = 2*CaptureChars*maxEscapedPerChar + TracebackBytes*maxEscapedPerChar + frameOverhead
	// captureFieldBytes caps the decoded stdout and stderr members.
	captureFieldBytes = CaptureChars * maxDecodedPerChar
)

// EnvOutputCaps passes the runner its caps
// ("<CaptureChars>,<TracebackBytes>,<DisplayBytes>,<DisplayCellBytes>");
// the runner deletes it before the first cell.
const EnvOutputCaps = "KERNPOOL_OUTPUT_CAPS"

// outputCapsValue is EnvOutputCaps' value.
func outputCapsValue() string {
	return strconv.Itoa(CaptureChars) + "," + strconv.Itoa(TracebackBytes) + "," +
		strconv.Itoa(DisplayBytes) + "," + strconv.Itoa(DisplayCellBytes)
}

// Budget returns the most daemon memory one kernel can make its readers
// hold for one cell: the decoded frame fields at their caps, the fd-level
// stdout and stderr kept for the cell, and its displays. Everything read from the
// kernel is charged against it; a kernel that goes over it (for instance
// with a forged frame repeating a large member) broke the protocol.
func (s Spec) Budget() int64 {
	spec := s
	spec.fillCaps()
	return int64(2*captureFieldBytes+TracebackBytes+8*smallFieldBytes+DisplayCellBytes) +
		int64(spec.RawStdoutCap) + int64(spec.StderrCap)
}

// fillCaps applies the default caps to zero fields.
func (s *Spec) fillCaps() {
	s.MaxFrameBytes = cmp.Or(s.MaxFrameBytes, DefaultMaxFrameBytes)
	s.RawStdoutCap = cmp.Or(s.RawStdoutCap, DefaultRawStdoutCap)
	s.StderrCap = cmp.Or(s.StderrCap, DefaultStderrCap)
}

// budget accounts the bytes the daemon holds for what one kernel sent
// during one cell. It never blocks: a charge over the limit fails.
type budget struct {
	limit int64
	held  atomic.Int64
	peak  atomic.Int64
}

// charge records n more bytes held, or fails (changing nothing) when that
// would pass the limit.
func (b *budget) charge(n int) error {
	if n <= 0 {
		return nil
	}
	held := b.held.Add(int64(n))
	if held > b.limit {
		b.held.Add(-int64(n))
		return protocolErr(fmt.Sprintf("the kernel's output needs more than its %s memory budget in the daemon", units.FormatBytes(b.limit)))
	}
	for {
		p := b.peak.Load()
		if held <= p || b.peak.CompareAndSwap(p, held) {
			return nil
		}
	}
}

// release records n bytes no longer held.
func (b *budget) release(n int) { b.held.Add(-int64(n)) }

// reset forgets what was held (a new cell begins).
func (b *budget) reset() { b.held.Store(0) }
