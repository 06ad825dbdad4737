package envscrub

import "strings"

// stripANSI removes terminal escape sequences (parity §2), matching on code
// points, not bytes: CSI ESC [ [0x30-0x3f]* [0x20-0x2f]* [0x40-0x7e]; OSC
// ESC ] ... (BEL | ESC \); DCS/SOS/PM/APC ESC [PX^_] ... ESC \; nF
// ESC [0x20-0x2f]+ [0x30-0x7e]; two-character ESC [0x30-0x7e]; 8-bit CSI
// U+009B...; 8-bit OSC U+009D ... (BEL | U+009C); any other U+0080..U+009F.
// Where a sequence is incomplete the reference's alternation order decides
// (an unterminated OSC loses only "ESC ]").
//
// One deliberate difference: an ESC that starts no sequence is removed on
// its own, where the reference keeps it. The reference's output can hold an
// ESC that a second pass then joins with the next character (ESC ESC X),
// so it is not idempotent; here the output never holds ESC or a C1
// control, so stripping twice changes nothing.
//
// s must be valid UTF-8: the pipeline turns invalid bytes into U+FFFD
// first (bytes are not code points, and removing a sequence must not join
// stray bytes into a C1 control). Text without ESC or a C1 code point is
// returned as is, without copying; rw (nil for none) supplies the buffer.
func stripANSI(rw *rewriter, s string) string {
	st := ansiState{s: s}
	i := st.nextEscape(0)
	if i < 0 {
		return s
	}
	b := rw.take(len(s))
	last := 0
	for i >= 0 {
		b = append(b, s[last:i]...)
		last = st.sequenceEnd(i)
		i = st.nextEscape(last)
	}
	b = append(b, s[last:]...)
	return rw.commit(b)
}

// nextEscape finds the first ESC byte or C1 code point (UTF-8 C2 80..9F)
// at or after from, remembering the next ESC and the next C1 so that a
// text of many C1s and no ESC is not rescanned for ESC each time.
func (st *ansiState) nextEscape(from int) int {
	esc := cachedIndex(st.s, from, "\x1b", &st.noESC, &st.escAt, &st.escFrom)
	c1 := st.nextC1(from)
	switch {
	case esc < 0:
		return c1
	case c1 < 0 || esc < c1:
		return esc
	default:
		return c1
	}
}

// nextC1 finds the first C1 code point at or after from (cached as above).
func (st *ansiState) nextC1(from int) int {
	if st.noC1 {
		return -1
	}
	if st.c1Valid && from >= st.c1From && from <= st.c1At {
		return st.c1At
	}
	i := indexC1(st.s[from:])
	st.c1From, st.c1Valid = from, true
	if i < 0 {
		st.noC1 = true
		return -1
	}
	st.c1At = from + i
	return st.c1At
}

// indexC1 finds the first C1 code point in s.
func indexC1(s string) int {
	off := 0
	for {
		i := strings.IndexByte(s[off:], 0xc2)
		if i < 0 {
			return -1
		}
		i += off
		if i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f {
			return i
		}
		off = i + 1
	}
}

// ansiState caches terminator searches: once no terminator of a kind
// exists after a position, none exists after any later one, so a flood of
// unterminated OSC/DCS starts stays linear.
type ansiState struct {
	s                    string
	noBEL, noST, noC1ST  bool
	belAt, stAt, c1STAt  int
	belFrom, stFrom, c1F int
	noESC, noC1, c1Valid bool
	escAt, escFrom       int
	c1At, c1From         int
}

// sequenceEnd returns the end of the sequence starting at i (an ESC byte
// or a C1 code point); at least the introducer itself is consumed.
func (st *ansiState) sequenceEnd(i int) int {
	s := st.s
	if s[i] != 0x1b {
		return st.c1End(i)
	}
	if i+1 >= len(s) {
		return i + 1
	}
	switch c := s[i+1]; {
	case c == '[':
		if end, ok := csiEnd(s, i+2); ok {
			return end
		}
		return i + 2 // "ESC [" alone: the two-character alternative
	case c == ']':
		if end := st.oscEnd(i + 2); end >= 0 {
			return end
		}
		return i + 2
	case c == 'P' || c == 'X' || c == '^' || c == '_':
		if j := st.stIndex(i + 2); j >= 0 {
			return j + 2
		}
		return i + 2
	case c >= 0x20 && c <= 0x2f:
		j := i + 1
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
			j++
		}
		if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
			return j + 1
		}
		return i + 1 // lone ESC (see StripANSI)
	case c >= 0x30 && c <= 0x7e:
		return i + 2
	default:
		return i + 1 // lone ESC
	}
}

// c1End handles a C1 code point (two UTF-8 bytes) at i.
func (st *ansiState) c1End(i int) int {
	s := st.s
	switch s[i+1] {
	case 0x9b:
		if end, ok := csiEnd(s, i+2); ok {
			return end
		}
	case 0x9d:
		bel := st.belIndex(i + 2)
		c1 := st.c1STIndex(i + 2)
		switch {
		case bel >= 0 && (c1 < 0 || bel < c1):
			return bel + 1
		case c1 >= 0:
			return c1 + 2
		}
	}
	return i + 2
}

// csiEnd parses [0x30-0x3f]* [0x20-0x2f]* [0x40-0x7e] from j.
func csiEnd(s string, j int) (int, bool) {
	for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
		j++
	}
	for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
		j++
	}
	if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
		return j + 1, true
	}
	return 0, false
}

// oscEnd finds the first BEL or ESC \ from j; -1 when neither exists.
func (st *ansiState) oscEnd(j int) int {
	bel, esc := st.belIndex(j), st.stIndex(j)
	switch {
	case bel >= 0 && (esc < 0 || bel < esc):
		return bel + 1
	case esc >= 0:
		return esc + 2
	}
	return -1
}

func (st *ansiState) belIndex(j int) int {
	return cachedIndex(st.s, j, "\a", &st.noBEL, &st.belAt, &st.belFrom)
}

func (st *ansiState) stIndex(j int) int {
	return cachedIndex(st.s, j, "\x1b\\", &st.noST, &st.stAt, &st.stFrom)
}

func (st *ansiState) c1STIndex(j int) int {
	return cachedIndex(st.s, j, "\u009c", &st.noC1ST, &st.c1STAt, &st.c1F)
}

// cachedIndex is strings.Index(s[j:], sub)+j, remembering the last hit and
// the absence of any hit, so repeated searches from increasing j are
// linear in total.
func cachedIndex(s string, j int, sub string, none *bool, at, from *int) int {
	if *none {
		return -1
	}
	// *from holds the start of the last search plus one (0: none yet).
	if *from != 0 && j >= *from-1 && *at >= j {
		return *at
	}
	i := strings.Index(s[j:], sub)
	if i < 0 {
		*none = true
		return -1
	}
	*at, *from = j+i, j+1
	return j + i
}
