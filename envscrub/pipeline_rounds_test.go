package envscrub

import (
	"strings"
	"testing"
)

// TestCleanMasksASecretAMaskSpells: a known secret holding '*' or '.' can
// be spelled by a pattern's mask next to the text around it: here the DSN
// pass turns postgres://app:pa55word@db.example into ...:***@db.example,
// which holds the known secret "***@db.example" although the input did
// not. Clean masks the known secrets again after the patterns, and that
// re-mask of the DSN's own mask is still one secret. (gremlins: Clean
// returned after one round, or returned the text before the re-mask,
// and the secret left the daemon.)
func TestCleanMasksASecretAMaskSpells(t *testing.T) {
	const secret = "***@db.example"
	cases := []struct{ in, want string }{
		{"postgres://app:pa55word@db.example/x", "postgres://app:***/x"},
		{"dsn postgres://app:pa55word@db.example and more", "dsn postgres://app:*** and more"},
	}
	f := NewPipeline(OutputConfig{}).Filter([]string{secret})
	for _, c := range cases {
		if strings.Contains(c.in, secret) {
			t.Fatalf("%q holds the secret before Clean: the case tests nothing", c.in)
		}
		got := f.Clean(c.in)
		if got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
		if n := f.TakeRedactions(); n != 1 {
			t.Errorf("Clean(%q) counts %d redactions, want 1", c.in, n)
		}
	}
}
