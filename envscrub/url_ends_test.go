package envscrub

import "testing"

// TestBareTokenAtItsEnds: scheme://TOKEN@host masks a token of 8
// characters or more (the grammar's {8,}) and keeps a shorter one; a URL
// that ends the text, or whose '@' ends it, is kept as it is (nothing
// follows the '@' to make it userinfo).
func TestBareTokenAtItsEnds(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://abcdefgh@github.com/o/r", "https://***@github.com/o/r"},
		{"https://abcdefg@github.com/o/r", "https://abcdefg@github.com/o/r"},
		{"see https://example.com", "see https://example.com"},
		{"token https://abcdefgh@", "token https://abcdefgh@"},
		{"token https://abcdefgh@ next", "token https://abcdefgh@ next"},
	}
	for _, c := range cases {
		if got := redactColon(c.in); got != c.want {
			t.Errorf("redactColon(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
