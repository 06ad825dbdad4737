package envscrub

import (
	"strings"
	"testing"
)

// TestPrefixBodyEnds: the body bounds of the xapp- and sk- rules, where
// a token's body is cut short by the text's end or a non-body byte, or
// holds one character fewer than the rule's minimum. (gremlins: an xapp-
// body of exactly 10 was kept and one of 8 or 9 masked, digits running to
// the end of the text indexed past it, and an sk- without a body, or too
// short a one, returned an end before its start, which only a non-word
// byte at index 1 lets through, and a failed candidate 32 bytes before the
// end read the byte past it: each lived.)
func TestPrefixBodyEnds(t *testing.T) {
	runRedact(t, []redactCase{
		{"xapp- body of exactly 10", "key: xapp-1-Ab3De6Gh9J end", "key: *** end"},
		{"xapp- body of 9 kept", "key: xapp-1-Ab3De6Gh9 end", "key: xapp-1-Ab3De6Gh9 end"},
		{"xapp- body of 8 kept", "key: xapp-1-Ab3De6Gh end", "key: xapp-1-Ab3De6Gh end"},
		{"xapp- digits to the end kept", "see xapp-12345", "see xapp-12345"},
		{"sk- without a body kept", "> sk- here", "> sk- here"},
		{"sk- body of 3 kept", "> sk-abc here", "> sk-abc here"},
		{"sk- body of 9 kept", "> sk-abcdefghi here", "> sk-abcdefghi here"},
		{"sk- body of exactly 10", "see sk-abcdefghij here", "see *** here"},
		// A failed hex-led candidate 32 bytes before the end is not a
		// Zhipu key: its '.' would lie past the text.
		{"fc- failing 32 bytes from the end", "fc-short" + strings.Repeat(" ", 24), "fc-short" + strings.Repeat(" ", 24)},
	})
}

// TestTokenAfterAnEscapeLetter: a token glued to the letter of a \n-style
// escape is masked, at the very start of the text too (i == 2) and for
// the letters at both ends of both cases. (gremlins: i > 2, c > 'a' and
// a candidate scan that skipped a 9-long run before '_' lived, and the
// token after them left the daemon as it was.)
func TestTokenAfterAnEscapeLetter(t *testing.T) {
	const tok, masked = "ghp_Ab3De6Gh9Jk2Mn5Pq8St", "ghp_Ab...q8St"
	var cases []redactCase
	for _, esc := range []string{`\n`, `\a`, `\z`, `\A`, `\Z`} {
		cases = append(cases,
			redactCase{esc + " at the start", esc + tok + " end", esc + masked + " end"},
			redactCase{esc + " inside", `"x` + esc + tok + `"`, `"x` + esc + masked + `"`},
		)
	}
	// retaindb_ has the longest head (8): with the escape's letter the
	// alphanumeric run before '_' is 9 long, and the scan for candidates
	// still looks at its last 8.
	cases = append(cases, redactCase{"retaindb_ after \\n", `"x\nretaindb_Ab3De6Gh9Jk2Mn5Pq8St"`, `"x\nretain...q8St"`})
	runRedact(t, cases)
}

// TestTokenAfterAHexEscape: a token glued to a \uXXXX or \xHH escape is
// masked when the escape's digits are hex (both ends of 0-9, a-f and A-F
// appear below), and stays glued, so kept, when they are not. (gremlins:
// the hex ranges' ends and isHex's loop bound lived.)
func TestTokenAfterAHexEscape(t *testing.T) {
	const tok, masked = "ghp_Ab3De6Gh9Jk2Mn5Pq8St", "ghp_Ab...q8St"
	var cases []redactCase
	for _, esc := range []string{`\u0a9f`, `\uA0F9`, `\x0a`, `\x9f`, `\xAF`} {
		cases = append(cases, redactCase{esc + " is an escape", `"x` + esc + tok + `"`, `"x` + esc + masked + `"`})
	}
	for _, glued := range []string{`\uZZZZ`, `\u00g0`, `\u0G00`, `\xG0`, `\x0g`} {
		cases = append(cases, redactCase{glued + " is not", `"x` + glued + tok + `"`, `"x` + glued + tok + `"`})
	}
	runRedact(t, cases)
}

// TestTokensFoundOutOfTextOrder: candidates are gathered by kind ('-'
// heads, then '_' heads, then SG., Zhipu keys, AIza/AKIA/gAAAA and
// GR1348941), so a '_' token before a '-' token, or an AKIA key before
// both, is found after them and must be sorted back into text order.
// (gremlins: len(starts) <= 1 lived: the later token was masked first and
// the earlier one, before the scan's resume point, left as it was.)
func TestTokensFoundOutOfTextOrder(t *testing.T) {
	const (
		ghp  = "ghp_Ab3De6Gh9Jk2Mn5Pq8St"
		xoxb = "xoxb-Ab3De6Gh9Jk2Mn5Pq8St"
		akia = "AKIAABCDEFGHIJKLMNOP"
	)
	runRedact(t, []redactCase{
		{"'_' before '-'", ghp + " then " + xoxb, "ghp_Ab...q8St then xoxb-A...q8St"},
		{"AKIA before '_' and '-'", akia + " " + ghp + " " + xoxb, "AKIAAB...MNOP ghp_Ab...q8St xoxb-A...q8St"},
	})
}

// TestZhipuKeyAfterText: an unprefixed Zhipu key
// ([0-9a-f]{32}.[A-Za-z0-9]{16,}) is masked after other text, not only at the start, unless glued to a
// '.' (the reference bounds it by [A-Za-z0-9_.-]); a '-' candidate whose
// byte 32 on is '.' and 16 alphanumerics, but whose hex run is 2 long,
// is not one. (gremlins: the left-boundary check read s[i+1], a hex digit,
// and took a key glued to a '.'; a run length of e+i let the short run
// through; a suffix of exactly 16 was left; a key glued to a '_' after it
// returned an end before its start: all lived, every Zhipu case being
// at the start.)
func TestZhipuKeyAfterText(t *testing.T) {
	hex32 := strings.Repeat("a1", 16)
	key := hex32 + ".AbCdEfGhIjKlMnOpQr"
	notKey := strings.Repeat(" ", 20) + "fc-" + strings.Repeat(" ", 29) + ".abcdefghijklmnop"
	runRedact(t, []redactCase{
		{"after text", "key: " + key + " end", "key: a1a1a1...OpQr end"},
		{"in quotes", `{"k": "` + key + `"}`, `{"k": "a1a1a1...OpQr"}`},
		{"glued to a '.' kept", "see ." + key + " end", "see ." + key + " end"},
		{"glued to a '_' after it kept", "key: " + key + "_x end", "key: " + key + "_x end"},
		{"a suffix of exactly 16", "key: " + hex32 + ".AbCdEfGhIjKlMnOp end", "key: a1a1a1...MnOp end"},
		{"a suffix of 15 kept", "key: " + hex32 + ".AbCdEfGhIjKlMnO end", "key: " + hex32 + ".AbCdEfGhIjKlMnO end"},
		{"a short hex run 32 bytes before a '.'", notKey, notKey},
	})
}
