package envscrub

import (
	"strings"
	"testing"
)

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
		// CSI: ESC [, parameters 0x30..0x3f, intermediates 0x20..0x2f, a
		// final 0x40..0x7e.
		{"a\x1b[?25hb", "ab"}, {"a\x1b[0 /mb", "ab"}, {"a\x1b[@b", "ab"}, {"a\x1b[~b", "ab"}, {"a\x1b[\x7fb", "a\x7fb"},
		// Two-character ESC X, X in 0x30..0x7e.
		{"a\x1b0b", "ab"}, {"a\x1b~b", "ab"},
	} {
		if got := stripANSI(nil, tc.in); got != tc.want {
			t.Errorf("stripANSI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAssignmentAfterEqualsRun: a run of '=' (a comparison, then a stray
// '='), or an '=' that opens the text, does not end the scan: a secret
// assignment after it is masked.
func TestAssignmentAfterEqualsRun(t *testing.T) {
	for _, in := range []string{"x=== PASSWORD=hunter2hunter2", "a==b ==PASSWORD=hunter2hunter2", "=x PASSWORD=hunter2hunter2"} {
		if got := redactAssignments(in); strings.Contains(got, "hunter2") {
			t.Errorf("redactAssignments(%q) = %q: the value is not masked", in, got)
		}
	}
}

// TestColonPatternsAfterColonRun: an opening ':' or a run of them does not
// end the ':'-anchored scan: an Authorization header after it is masked.
func TestColonPatternsAfterColonRun(t *testing.T) {
	const token = "abcdefghijklmnopqrstuvwxyz123456"
	for _, in := range []string{":x Authorization: Bearer " + token, "a:: Authorization: Bearer " + token} {
		if got := redactColon(in); strings.Contains(got, token) {
			t.Errorf("redactColon(%q) = %q: the token is not masked", in, got)
		}
	}
}
