package envscrub

import (
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Byte classes used by the hand-written matchers (Go's RE2 has no
// look-around, so boundaries are checked with these tables).
const (
	clWord      = 1 << iota // [A-Za-z0-9_-]: the reference's token boundary
	clAlnum                 // [A-Za-z0-9]
	clUpperDig              // [A-Z0-9]
	clDigit                 // [0-9]
	clLowerHex              // [0-9a-f]
	clSpace                 // ASCII \s: space \t \n \v \f \r
	clNameChar              // [A-Za-z0-9_]: environment-style names
	clFernet                // [A-Za-z0-9_=-]
	clTelegram              // [-A-Za-z0-9_]
	clSchemeChr             // [A-Za-z0-9+.-]
	clDash                  // '-'
	clDot                   // '.'
	clTokFirst              // first byte of a token prefix, or [0-9a-f] (Zhipu)
)

// tokenFirstBytes are the first bytes of the token prefixes (prefix.go).
const tokenFirstBytes = "sgxAprfbSahndtemGRk"

var class = func() (t [256]uint16) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		alpha := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
		digit := b >= '0' && b <= '9'
		if alpha || digit {
			t[c] |= clAlnum | clWord | clNameChar | clFernet | clTelegram | clSchemeChr
		}
		if b >= 'A' && b <= 'Z' || digit {
			t[c] |= clUpperDig
		}
		if digit {
			t[c] |= clDigit
		}
		if digit || b >= 'a' && b <= 'f' {
			t[c] |= clLowerHex
		}
		if digit || b >= 'a' && b <= 'f' || strings.IndexByte(tokenFirstBytes, b) >= 0 {
			t[c] |= clTokFirst
		}
		switch b {
		case '_':
			t[c] |= clWord | clNameChar | clFernet | clTelegram
		case '-':
			t[c] |= clWord | clFernet | clTelegram | clSchemeChr | clDash
		case '=':
			t[c] |= clFernet
		case '+':
			t[c] |= clSchemeChr
		case '.':
			t[c] |= clSchemeChr | clDot
		case ' ', '\t', '\n', '\v', '\f', '\r':
			t[c] |= clSpace
		}
	}
	return t
}()

func is(c byte, cl uint16) bool { return class[c]&cl != 0 }

// runOf returns the end of the run of class cl starting at i.
func runOf(s string, i int, cl uint16) int {
	for i < len(s) && class[s[i]]&cl != 0 {
		i++
	}
	return i
}

// skipSpace returns the end of the ASCII whitespace run at i.
func skipSpace(s string, i int) int { return runOf(s, i, clSpace) }

// nonSpaceEnd returns the end of the \S+ run at i (any byte but ASCII
// whitespace; multi-byte runes never contain ASCII bytes).
func nonSpaceEnd(s string, i int) int {
	for i < len(s) && class[s[i]]&clSpace == 0 {
		i++
	}
	return i
}

// stripMaskControls removes what must never be echoed inside a mask: C0/C1
// controls, DEL, zero-width and bidi characters (as the reference's
// mask_secret does), so a mask never carries invisible bytes.
func stripMaskControls(v string) string {
	clean := true
	for _, r := range v {
		if maskControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return v
	}
	return strings.Map(func(r rune) rune {
		if maskControl(r) {
			return -1
		}
		return r
	}, v)
}

func maskControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
		(r >= 0x200b && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2060 && r <= 0x2064)
}

// maskToken is the reference's mask: shorter than 18 characters (after
// control stripping) becomes ***, longer keeps its first 6 and last 4
// characters around "...". Characters are runes, as in Python.
func maskToken(tok string) string {
	tok = stripMaskControls(tok)
	n := utf8.RuneCountInString(tok)
	if n < 18 {
		return "***"
	}
	head, tail := 0, len(tok)
	for k := 0; k < 6; k++ {
		_, w := utf8.DecodeRuneInString(tok[head:])
		head += w
	}
	for k := 0; k < 4; k++ {
		_, w := utf8.DecodeLastRuneInString(tok[:tail])
		tail -= w
	}
	return tok[:head] + "..." + tok[tail:]
}

// isMask reports whether v is already a mask this package produced: "***"
// or 6 characters, "...", 4 characters. Masking it again would erase what
// the first mask kept, and break idempotency.
func isMask(v string) bool {
	if v == "***" {
		return true
	}
	if len(v) < 13 || utf8.RuneCountInString(v) != 13 {
		return false
	}
	head := 0
	for k := 0; k < 6; k++ {
		_, w := utf8.DecodeRuneInString(v[head:])
		head += w
	}
	return strings.HasPrefix(v[head:], "...")
}

// edit replaces s[start:end] with repl.
type edit struct {
	start, end int
	repl       string
}

// rewriter gives the passes of one Clean call two reusable buffers, used
// alternately: each pass reads the previous pass's output and writes the
// next, so a 1 MiB output costs two allocations instead of one per pass
// (allocation and GC of those copies were most of the pipeline's time).
//
// The strings it returns alias its buffers, so the invariant is: the text a
// pass reads never lives in the buffer it writes (take always hands out the
// buffer the last commit did not use), and a rewriter is used by one Clean
// call only, whose final string then owns its buffer for good. A nil
// *rewriter allocates fresh memory every time.
type rewriter struct {
	bufs [2][]byte
	next int
	pool *sync.Pool // of *[]byte scratch buffers, owned by the Pipeline
	// edits counts the secrets masked (Filter.TakeRedactions).
	edits int
	// masks are the spans (sorted, disjoint) of the current text that
	// earlier passes wrote: a later pass masking one of them again (the
	// DSN password that the token pass had already masked) re-masks the
	// same secret, which counts once.
	masks []edit
}

// maxPooledBuf bounds the buffers kept for reuse, so one huge output does
// not pin its memory for the daemon's life.
const maxPooledBuf = 16 << 20

// take returns an empty buffer of capacity n or more that does not hold
// the text the current pass reads.
func (rw *rewriter) take(n int) []byte {
	if rw == nil {
		return make([]byte, 0, n)
	}
	b := rw.bufs[rw.next]
	if b == nil && rw.pool != nil {
		if pb, ok := rw.pool.Get().(*[]byte); ok {
			b = *pb
		}
	}
	if cap(b) < n {
		b = make([]byte, 0, n+n/16)
	}
	return b[:0]
}

// release returns to the pool every buffer that result does not live in;
// result's buffer now belongs to the caller.
func (rw *rewriter) release(result string) {
	if rw == nil || rw.pool == nil {
		return
	}
	for i, b := range rw.bufs {
		if b == nil || cap(b) > maxPooledBuf {
			continue
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))
		at := uintptr(unsafe.Pointer(unsafe.StringData(result)))
		if len(result) > 0 && at >= start && at < start+uintptr(cap(b)) {
			continue
		}
		b = b[:0]
		rw.pool.Put(&b)
		rw.bufs[i] = nil
	}
}

// commit turns b (from take) into the pass's output string.
func (rw *rewriter) commit(b []byte) string {
	if rw == nil {
		return string(b)
	}
	rw.bufs[rw.next] = b
	rw.next ^= 1
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// apply applies sorted, non-overlapping edits to s; none means s itself.
func (rw *rewriter) apply(s string, edits []edit) string {
	if len(edits) == 0 {
		return s
	}
	if rw != nil {
		rw.count(edits)
	}
	b := rw.take(len(s) + 64)
	last := 0
	for _, e := range edits {
		b = append(b, s[last:e.start]...)
		b = append(b, e.repl...)
		last = e.end
	}
	b = append(b, s[last:]...)
	return rw.commit(b)
}

// count counts the edits that mask no earlier mask and maps the masks to
// the text the edits make (an edit absorbs the masks it overlaps).
func (rw *rewriter) count(edits []edit) {
	next := make([]edit, 0, len(rw.masks)+len(edits))
	j, delta := 0, 0
	for _, e := range edits {
		for ; j < len(rw.masks) && rw.masks[j].end <= e.start; j++ {
			next = append(next, edit{start: rw.masks[j].start + delta, end: rw.masks[j].end + delta})
		}
		again := false
		for ; j < len(rw.masks) && rw.masks[j].start < e.end; j++ {
			again = true
		}
		if !again {
			rw.edits++
		}
		next = append(next, edit{start: e.start + delta, end: e.start + delta + len(e.repl)})
		delta += len(e.repl) - (e.end - e.start)
	}
	for ; j < len(rw.masks); j++ {
		next = append(next, edit{start: rw.masks[j].start + delta, end: rw.masks[j].end + delta})
	}
	rw.masks = next
}

// applyEdits applies sorted, non-overlapping edits; none means s itself.
func applyEdits(s string, edits []edit) string {
	if len(edits) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, e := range edits {
		b.WriteString(s[last:e.start])
		b.WriteString(e.repl)
		last = e.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// foldSuffix reports whether s ends with the ASCII-lowercase suffix,
// ignoring ASCII case.
func foldSuffix(s, lowerSuffix string) bool {
	if len(s) < len(lowerSuffix) {
		return false
	}
	return equalFoldASCII(s[len(s)-len(lowerSuffix):], lowerSuffix)
}

func equalFoldASCII(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
