package kernel

import (
	"errors"
	"strings"
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

// A member's buffer holds (and the budget is charged) exactly what it
// keeps: bytes that fill its array need no growth (512 bytes fit a
// 600-byte budget in two adds), and a member with invalid UTF-8 ends up
// charged for its replaced copy alone, which must fit the member's cap.
func TestFieldBufHoldsWhatItKeeps(t *testing.T) {
	cases := []struct {
		name   string
		adds   []string
		limit  int
		budget int64
		want   string // "" for a refusal
	}{
		{"exact fill in two adds", []string{"a", strings.Repeat("b", 511)}, 1 << 20, 600, "a" + strings.Repeat("b", 511)},
		{"one invalid byte", []string{"a\xffb"}, 100, 1 << 20, "a\uFFFDb"},
		{"replaced copy at its cap", []string{"\xffa\xffa"}, 8, 1 << 20, "\uFFFDa\uFFFDa"},
		{"replaced copy over its cap", []string{"\xffa\xffa"}, 7, 1 << 20, ""},
		// grows by 2 bytes only, less than the 3 finish charges up front
		{"replaced copy 2 bytes over its cap", []string{"abcdef\xff"}, 7, 1 << 20, ""},
		// a runner's lone surrogate (surrogatepass: 3 bytes) keeps its length
		{"lone surrogate at its cap", []string{"abcd\xed\xa0\x80"}, 7, 1 << 20, "abcd\uFFFD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acct := &budget{limit: c.budget}
			f := fieldBuf{limit: c.limit, name: "stdout", acct: acct}
			for _, p := range c.adds {
				if err := f.add([]byte(p)); err != nil {
					t.Fatalf("add %d bytes: %v", len(p), err)
				}
			}
			s, err := f.finish()
			if c.want == "" {
				if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "exceeds its cap of 7 bytes") {
					t.Fatalf("finish = %q, %v; want the cap refused", s, err)
				}
				return
			}
			if err != nil || s != c.want {
				t.Fatalf("finish = %q, %v; want %q", s, err, c.want)
			}
			if held := acct.held.Load(); held != int64(len(c.want)) {
				t.Fatalf("%d bytes charged for a %d-byte member", held, len(c.want))
			}
		})
	}
}
