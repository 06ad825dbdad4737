package kernel

import (
	"testing"
)

// unescape at exact lengths (an escape that ends its input) and at the
// ends of the hex digit ranges, against the characters written out by
// hand.
func TestUnescapeAtItsEnds(t *testing.T) {
	cases := []struct {
		in, want string
		used     int
	}{
		{`\n`, "\n", 2},
		{`\/`, "/", 2},
		{`\u0041`, "A", 6},
		{`\u0039`, "9", 6},
		{`\u0030`, "0", 6},
		{`\u00a9`, "©", 6},
		{`\u00ff`, "ÿ", 6},
		{`\u00A9`, "©", 6},
		{`\u00FF`, "ÿ", 6},
		{`\ud83d\ude00`, "😀", 12},
		{`\uD83D\uDE00`, "😀", 12},
		{`\ud83d\ude0`, "\uFFFD", 6},
		{`\ud83dx`, "\uFFFD", 6},
	}
	for _, c := range cases {
		got, used, err := unescape([]byte(c.in), nil)
		if err != nil || string(got) != c.want || used != c.used {
			t.Errorf("unescape(%q) = %q, %d, %v; want %q, %d", c.in, got, used, err, c.want, c.used)
		}
	}
	for _, bad := range []string{`\`, `\u004`, `\u00g0`, `\u00/0`, `\u00:0`, `\u00G0`, `\u00@0`, "\\u00`0", `\x`} {
		if _, _, err := unescape([]byte(bad), nil); err == nil {
			t.Errorf("unescape(%q) accepted", bad)
		}
	}
}

// The runner escapes control characters as \u00XX with lower-case hex:
// those at the ends of the digit ranges come back as they were printed.
func TestControlCharactersRoundTrip(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	rep := mustExec(t, k, "print('\\x10\\x19\\x1a\\x1f', end='')")
	if rep.Stdout != "\x10\x19\x1a\x1f" {
		t.Fatalf("stdout %q", rep.Stdout)
	}
}
