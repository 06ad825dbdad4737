package kernel

import "testing"

// then's tail: cut to at most tailCap bytes on a character boundary when it
// is longer, kept as it is (a leading continuation byte of raw output
// included) when it is exactly tailCap bytes long. "abcdef" + "é" is the
// bytes a b c d e f C3 A9.
func TestSegmentThenTailCut(t *testing.T) {
	clipped := segment{head: "h", tail: "abcdef", total: 100} // Python-level, clipped
	cases := []struct {
		name     string
		s, next  segment
		tailCap  int
		wantTail string
	}{
		{"cut after a letter", clipped, segment{head: "é", total: 2}, 4, "efé"},
		{"cut at the last letter", clipped, segment{head: "é", total: 2}, 3, "fé"},
		{"cut at a character's start", clipped, segment{head: "é", total: 2}, 2, "é"},
		{"cut inside a character moves past it", clipped, segment{head: "é", total: 2}, 1, ""},
		{"fits", clipped, segment{head: "é", total: 2}, 8, "abcdefé"},
		{"exactly tailCap, raw tail kept", segment{head: "h", total: 5}, segment{head: "H", tail: "\xa9abc", total: 9}, 4, "\xa9abc"},
		{"exactly tailCap after a head", segment{head: "h", total: 5}, segment{head: "\xa9abc", total: 4}, 4, "\xa9abc"},
	}
	for _, c := range cases {
		out := c.s.then(c.next, c.tailCap)
		if out.tail != c.wantTail || out.head != c.s.head || out.total != c.s.total+c.next.total {
			t.Errorf("%s: head %q tail %q total %d; want %q %q %d", c.name, out.head, out.tail, out.total, c.s.head, c.wantTail, c.s.total+c.next.total)
		}
	}
}
