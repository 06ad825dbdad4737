package envscrub

import "testing"

// TestStripANSIRangeEnds: each end of every byte range stripANSI matches
// on (the comment's grammar): a character just inside is part of the
// sequence, one just outside is text.
func TestStripANSIRangeEnds(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// C1 code points U+0080..U+009F; U+00A0 (no-break space) is text.
		{"a\u0080b", "ab"}, {"a\u009fb", "ab"}, {"\u0085b", "b"}, {"a\u00a0b", "a\u00a0b"}, {"a\u007fb", "a\u007fb"},
		// nF: ESC, intermediates 0x20..0x2f, a final 0x30..0x7e.
		{"a\x1b Fb", "ab"}, {"a\x1b/Fb", "ab"}, {"a\x1b!  /Fb", "ab"},
		{"a\x1b(0b", "ab"}, {"a\x1b(~b", "ab"}, {"a\x1b(\x7fb", "a(\x7fb"},
		// Two-character ESC X, X in 0x30..0x7e.
		{"a\x1b0b", "ab"}, {"a\x1b~b", "ab"},
	} {
		if got := stripANSI(nil, tc.in); got != tc.want {
			t.Errorf("stripANSI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
