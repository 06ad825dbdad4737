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

// TestCleanRoundsEndWithTheReMask: a chain of DSNs where each round's mask
// spells the known secret ":***@db.io", whose re-mask glues the next link
// into a new DSN for the next round: postgres://u:p1@db.io:x***@db.io...
// becomes postgres://u***:x***@db.io... (the re-mask), whose password
// x*** the next round masks. Clean stops after four rounds, but the last
// one ends with the re-mask, so the secret never leaves: before, a chain
// of four links after the first put it in the output. The outputs are
// worked out by hand, one link per round.
func TestCleanRoundsEndWithTheReMask(t *testing.T) {
	const secret = ":***@db.io"
	cases := []struct{ links, want string }{
		{":x***@db.io", "postgres://u******"},
		{":x***@db.io:y***@db.io", "postgres://u*********"},
		{":x***@db.io:y***@db.io:z***@db.io", "postgres://u************"},
		// The fourth round masks z***, its re-mask glues w*** on: the
		// chain's rest is left as the cap leaves it, the secret is not.
		{":x***@db.io:y***@db.io:z***@db.io:w***@db.io", "postgres://u************:w***@db.io"},
		{":x***@db.io:y***@db.io:z***@db.io:w***@db.io:v***@db.io", "postgres://u************:w***@db.io:v***@db.io"},
	}
	f := NewPipeline(OutputConfig{}).Filter([]string{secret})
	for _, c := range cases {
		in := "postgres://u:p1@db.io" + c.links
		got := f.Clean(in)
		if strings.Contains(got, secret) {
			t.Errorf("Clean(%q) = %q holds the known secret %q", in, got, secret)
		}
		if got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, c.want)
		}
	}
}
