package envscrub

import (
	"slices"
	"strings"
	"testing"
)

// TestRewriterMasksFollowTheText: after every pass, the rewriter's mask
// spans are exactly where the masks written so far sit in the new text,
// and an edit counts one secret unless it overlaps an earlier mask.
// Masks here are bracketed ("[m]") and the text has no brackets, so the
// expected spans are found by scanning the output for brackets, not by
// the rewriter's arithmetic. Edits that lengthen and shorten the text
// before, between and after earlier masks, touching them at either end
// and over them, move every later span (gremlins' mutants of count's
// shifts, deltas and touching bounds lived under the whole suite: a wrong
// span makes a later pass count a re-masked secret twice, or a new one
// not at all).
func TestRewriterMasksFollowTheText(t *testing.T) {
	type repl struct{ find, with string }
	cases := []struct {
		name   string
		text   string
		passes [][]repl // each pass's edits, in text order
		want   int      // secrets counted
	}{
		{"an edit right after a mask is a new secret", "aabbbbcc",
			[][]repl{{{"bbbb", "[x]"}}, {{"cc", "[yy]"}}}, 2},
		{"an edit right before a mask is a new secret", "aabbbbcc",
			[][]repl{{{"bbbb", "[x]"}}, {{"aa", "[yy]"}}}, 2},
		{"an edit over a mask re-masks it", "aabbbbcc",
			[][]repl{{{"bbbb", "[x]"}}, {{"a[x]c", "[yy]"}}}, 1},
		{"a mask between two longer edits moves", "aa bbbb cc dd",
			[][]repl{{{"bbbb", "[x]"}}, {{"aa", "[long]"}, {"cc", "[longer]"}}}, 3},
		{"a mask between two shorter edits moves", "aaaaaaaa bbbb cccccccc dd",
			[][]repl{{{"bbbb", "[x]"}}, {{"aaaaaaaa", "[a]"}, {"cccccccc", "[c]"}}}, 3},
		{"a mask after the last edit moves", "aaaaaaaa bbbb cc",
			[][]repl{{{"bbbb", "[x]"}}, {{"aaaaaaaa", "[a]"}}}, 2},
		{"a mask after a longer last edit moves", "aa bbbb cc",
			[][]repl{{{"bbbb", "[x]"}}, {{"aa", "[longer]"}}}, 2},
		{"a second edit of a pass lands where the first left it", "aaaaaaaa bb cc dd",
			[][]repl{{{"aaaaaaaa", "[a]"}, {"cc", "[c]"}, {"dd", "[longer]"}}}, 3},
		{"a re-mask shifts what follows it", "xx bbbbbbbb cc dd ee",
			[][]repl{
				{{"bbbbbbbb", "[b]"}, {"dd", "[d]"}},
				{{"[b]", "[bbbbbb]"}, {"cc", "[c]"}},
				{{"[d]", "[dd]"}, {"ee", "[e]"}},
			}, 4},
		{"three passes, masks on both sides", "aa bb cc dd ee ff gg",
			[][]repl{
				{{"cc", "[c]"}, {"ee", "[eeeeeeee]"}},
				{{"aa", "[aaaaaa]"}, {"dd", "[d]"}, {"gg", "[g]"}},
				{{"bb", "[b]"}, {"[eeeeeeee]", "[E]"}, {"ff", "[f]"}},
			}, 7},
	}
	for _, c := range cases {
		rw := &rewriter{}
		s := c.text
		for p, pass := range c.passes {
			var edits []edit
			from := 0
			for _, r := range pass {
				i := strings.Index(s[from:], r.find)
				if i < 0 {
					t.Fatalf("%s: pass %d: %q not in %q after %d", c.name, p, r.find, s, from)
				}
				edits = append(edits, edit{from + i, from + i + len(r.find), r.with})
				from += i + len(r.find)
			}
			s = rw.apply(s, edits)
			if got, want := maskSpans(rw.masks), bracketSpans(s); !slices.Equal(got, want) {
				t.Errorf("%s: after pass %d the text is %q with masks at %v, the rewriter has %v", c.name, p, s, want, got)
			}
		}
		if rw.edits != c.want {
			t.Errorf("%s: %q counts %d secrets, want %d", c.name, s, rw.edits, c.want)
		}
	}
}

func maskSpans(masks []edit) [][2]int {
	var out [][2]int
	for _, m := range masks {
		out = append(out, [2]int{m.start, m.end})
	}
	return out
}

// bracketSpans returns the spans of the "[...]" runs in s.
func bracketSpans(s string) [][2]int {
	var out [][2]int
	for i := 0; i < len(s); i++ {
		if s[i] == '[' {
			end := i + strings.IndexByte(s[i:], ']') + 1
			out = append(out, [2]int{i, end})
			i = end - 1
		}
	}
	return out
}
