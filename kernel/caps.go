package kernel

import (
	"cmp"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/kernpool/kernpool/units"
)

// The runner's caps and the frame limit derived from them. Each is
// defined here once: the runner receives them on EnvOutputCaps, and the
// daemon's decoder enforces the same figures again, so a kernel that
// forges a frame gets no more daemon memory than an honest one.
const (
	// CaptureChars is parity §2's cap on one cell's Python-level stdout
	// and stderr: the default of Spec.StdoutCap and Spec.StderrCap, now
	// counted in UTF-8 bytes.
	CaptureChars = 1_000_000
	// DefaultTailBytes is the default of Spec.TailBytes: how much of the
	// end of each stream is kept beyond its cap, so the inline tail of a
	// result is the real end of the output.
	DefaultTailBytes = 64 << 10
	// TracebackBytes caps the traceback (and a SystemExit message) the
	// runner reports, in UTF-8 bytes, notice included: head 40 %, the
	// reference's truncation notice, tail 60 %.
	TracebackBytes = 64 << 10
	// ErrorNameBytes caps an exception's class name (ename); its message
	// (evalue) and its traceback entries together (frames) are capped at
	// TracebackBytes each, like the traceback text.
	ErrorNameBytes = 256
	// errorFieldBytes is what one exception may take in a frame: the
	// traceback text, evalue, frames and ename.
	errorFieldBytes = 3*TracebackBytes + ErrorNameBytes

	// maxEscapedPerByte: the runner's JSON escaping writes at most 6 bytes
	// for one byte of UTF-8 (a control character as \u00XX); non-ASCII
	// stays raw UTF-8.
	maxEscapedPerByte = 6
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
	// writes with the default caps: stdout and stderr at CaptureChars
	// each plus their tails, fully escaped, the exception's fields and the
	// overhead (about 14 MB; Spec.MaxFrameBytes defaults to the same sum
	// for its own caps). Displays travel in D frames of their own (at most
	// DisplayBytes each) and add DisplayCellBytes to Budget.
	DefaultMaxFrameBytes = (2*CaptureChars+2*DefaultTailBytes+errorFieldBytes)*maxEscapedPerByte + frameOverhead
)

// EnvOutputCaps passes the runner its caps ("<StdoutCap>,<StderrCap>,
// <TailBytes>,<TracebackBytes>,<DisplayBytes>,<DisplayCellBytes>"); the
// runner deletes it before the first cell.
const EnvOutputCaps = "KERNPOOL_OUTPUT_CAPS"

// outputCapsValue is EnvOutputCaps' value for spec (caps filled).
func outputCapsValue(spec *Spec) string {
	return strconv.Itoa(spec.StdoutCap) + "," + strconv.Itoa(spec.StderrCap) + "," + strconv.Itoa(spec.TailBytes) + "," +
		strconv.Itoa(TracebackBytes) + "," + strconv.Itoa(DisplayBytes) + "," + strconv.Itoa(DisplayCellBytes)
}

// frameCaps are the decoder's caps on a reply frame's members, in bytes.
type frameCaps struct{ stdout, stderr, tail int }

func (s *Spec) frameCaps() frameCaps {
	return frameCaps{stdout: s.StdoutCap, stderr: s.StderrCap, tail: s.TailBytes}
}

// defaultFrameCaps are the caps of a Spec with every cap at its default.
var defaultFrameCaps = frameCaps{stdout: CaptureChars, stderr: CaptureChars, tail: DefaultTailBytes}

// Budget returns the most daemon memory one kernel can make its readers
// hold for one cell: the decoded frame fields at their caps, the fd-level
// stdout and stderr kept for the cell (head and tail), and its displays.
// Everything read from the kernel is charged against it; a kernel that
// goes over it (for instance with a forged frame repeating a large
// member) broke the protocol.
func (s Spec) Budget() int64 {
	spec := s
	spec.fillCaps()
	return int64(spec.StdoutCap+spec.StderrCap+4*spec.TailBytes+errorFieldBytes+8*smallFieldBytes+DisplayCellBytes) +
		int64(spec.RawStdoutCap) + int64(spec.StderrCap)
}

// fillCaps applies the default caps to zero fields.
func (s *Spec) fillCaps() {
	s.StdoutCap = cmp.Or(s.StdoutCap, CaptureChars)
	s.TailBytes = cmp.Or(s.TailBytes, DefaultTailBytes)
	s.RawStdoutCap = cmp.Or(s.RawStdoutCap, DefaultRawStdoutCap)
	s.StderrCap = cmp.Or(s.StderrCap, DefaultStderrCap)
	s.MaxFrameBytes = cmp.Or(s.MaxFrameBytes,
		int64(s.StdoutCap+s.StderrCap+2*s.TailBytes+errorFieldBytes)*maxEscapedPerByte+frameOverhead)
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
