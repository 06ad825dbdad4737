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

// wireSegment's total is at least what the frame kept, whatever length it
// claims (a quiet frame leaves stdout_len out).
func TestWireSegmentTotal(t *testing.T) {
	cases := []struct {
		head, tail  string
		total, want int
	}{
		{"abc", "de", 0, 5},
		{"abc", "de", 4, 5},
		{"abc", "de", 9, 9},
		{"abc", "", 0, 3},
	}
	for _, c := range cases {
		if got := wireSegment(c.head, c.tail, c.total).total; got != c.want {
			t.Errorf("wireSegment(%q, %q, %d).total = %d, want %d", c.head, c.tail, c.total, got, c.want)
		}
	}
}

// clipUTF8 keeps a string of exactly n bytes and cuts a longer one before
// the character that would cross n.
func TestClipUTF8(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abé", 4, "abé"},
		{"abé", 3, "ab"},
		{"abcd", 3, "abc"},
		{"é", 1, ""},
		{"\xa9\xa9x", 1, ""},
		{"", 0, ""},
	}
	for _, c := range cases {
		if got := clipUTF8(c.s, c.n); got != c.want {
			t.Errorf("clipUTF8(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
