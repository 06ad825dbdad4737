package kernel

import "unicode/utf8"

// segment is one stream of a cell as kept: all of it (tail empty and
// total == len(head)), or its first bytes and its last ones with
// total-len(head)-len(tail) bytes between them dropped.
type segment struct {
	head, tail string
	total      int
}

// whole reports whether nothing of the stream was dropped.
func (s segment) whole() bool { return s.tail == "" && s.total <= len(s.head) }

// end is the last bytes kept: the tail, or all of a whole stream.
func (s segment) end() string {
	if s.whole() {
		return s.head
	}
	return s.tail
}

// then is s followed by next (the runner's Python-level output, then the
// fd-level bytes), its tail cut to at most tailCap bytes (on a character
// boundary) when something was dropped.
func (s segment) then(next segment, tailCap int) segment {
	out := segment{total: s.total + next.total}
	if s.whole() {
		out.head = s.head + next.head
		if next.whole() {
			return out
		}
		out.tail = next.tail
		return out
	}
	out.head = s.head
	out.tail = next.end()
	if next.whole() {
		out.tail = s.tail + next.head
	}
	if len(out.tail) > tailCap {
		cut := len(out.tail) - tailCap
		for cut < len(out.tail) && !utf8.RuneStart(out.tail[cut]) {
			cut++
		}
		out.tail = out.tail[cut:]
	}
	return out
}

// wireSegment is what a reply frame says of one stream.
func wireSegment(head, tail string, total int) segment {
	return segment{head: head, tail: tail, total: max(total, len(head)+len(tail))}
}

// setStreams fills r's stream fields from the cell's two streams.
func (r *Reply) setStreams(stdout, stderr segment) {
	r.Stdout, r.StdoutTail, r.StdoutBytesTotal, r.StdoutClipped = stdout.head, stdout.tail, stdout.total, !stdout.whole()
	r.Stderr, r.StderrTail, r.StderrBytesTotal, r.StderrClipped = stderr.head, stderr.tail, stderr.total, !stderr.whole()
}
