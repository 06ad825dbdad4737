package envscrub

import (
	"strings"
	"testing"
	"unsafe"
)

func TestStripANSI(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "hello world", "hello world"},
		{"csi color", "\x1b[31mred\x1b[0m", "red"},
		{"csi params and intermediates", "a\x1b[1;2 qb", "ab"},
		{"csi private", "\x1b[?25lx\x1b[?25h", "x"},
		{"csi incomplete is two-char", "\x1b[\x01x", "\x01x"},
		{"osc bel", "\x1b]0;title\x07text", "text"},
		{"osc st", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"osc first terminator wins", "\x1b]a\x07b\x1b\\c", "bc"},
		{"osc unterminated loses only ESC ]", "\x1b]title", "title"},
		{"dcs", "\x1bPq#0;2\x1b\\after", "after"},
		{"sos pm apc", "\x1bXs\x1b\\1\x1b^p\x1b\\2\x1b_a\x1b\\3", "123"},
		{"dcs unterminated", "\x1bPdata", "data"},
		{"nF", "\x1b(Btext\x1b#8", "text"},
		{"nF incomplete drops lone ESC", "\x1b ", " "},
		{"two-char Fp/Fe/Fs", "\x1b7saved\x1b8\x1bM\x1bc", "saved"},
		{"lone ESC before newline", "a\x1b\nb", "a\nb"},
		{"ESC at end", "a\x1b", "a"},
		{"ESC before non-ASCII", "\x1bé", "é"},
		{"ESC ESC", "\x1b\x1b[31mX", "X"},
		{"8-bit csi", "a\u009b31mb", "ab"},
		{"8-bit csi incomplete", "a\u009b\u0001b", "a\u0001b"},
		{"8-bit osc bel", "\u009d0;t\x07x", "x"},
		{"8-bit osc st", "\u009d0;t\u009cx", "x"},
		{"8-bit osc unterminated", "\u009dtitle", "title"},
		{"bare C1", "a\u0085b\u0090c\u009fd", "abcd"},
		{"C1 is a code point, not a byte", "\u00c2\u00a9 caf\u00e9 \u0100", "\u00c2\u00a9 caf\u00e9 \u0100"},
		{"no ESC keeps C0", "a\tb\x07c", "a\tb\x07c"},
	}
	for _, c := range cases {
		if got := StripANSI(c.in); got != c.want {
			t.Errorf("%s: StripANSI(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
		if again := StripANSI(c.want); again != c.want {
			t.Errorf("%s: not idempotent: %q -> %q", c.name, c.want, again)
		}
	}
}

// Text without ESC or C1 is returned without copying.
func TestStripANSINoCopy(t *testing.T) {
	s := strings.Repeat("plain text ", 100)
	if got := StripANSI(s); unsafe.StringData(got) != unsafe.StringData(s) {
		t.Fatal("plain text was copied")
	}
}

// A flood of unterminated OSC starts stays linear (cached searches).
func TestStripANSIUnterminatedFlood(t *testing.T) {
	s := strings.Repeat("\x1b]x", 200_000)
	if got := StripANSI(s); got != strings.Repeat("x", 200_000) {
		t.Fatalf("len %d", len(got))
	}
}
