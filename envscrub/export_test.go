package envscrub

import (
	"strings"
	"unicode/utf8"
)

// StripANSI is the pipeline's ANSI strip alone, on any text (invalid UTF-8
// becomes U+FFFD first, as in Filter.Clean): the tests and the fuzzer
// compare it with the reference's regexes.
func StripANSI(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return stripANSI(nil, s)
}
