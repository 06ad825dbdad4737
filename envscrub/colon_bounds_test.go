package envscrub

import (
	"strings"
	"testing"
)

// TestColonAndAssignmentBounds: the ':' and '=' patterns at the edges of
// their grammar, one case per edge a generated mutant moved (.ci/gremlins):
// a secret at the very start of the text, a name of exactly the longest
// length, a dotted key, a header's credential that is one word or that
// follows a word with no space, a lowercase name outside a URL query, and
// a value already masked after one this scan masks. Each case names what
// must be masked (and so absent) and what must stay.
func TestColonAndAssignmentBounds(t *testing.T) {
	name64 := strings.Repeat("a_", 28) + "password" // 64 characters
	masked := redactColon("Authorization: Bearer abcdefghijklmnop1234")
	_, maskedCred, _ := strings.Cut(masked, "Bearer ")
	cases := []struct {
		what   string
		redact func(string) string
		in     string
		secret string // absent from the output
		kept   string // present in the output
	}{
		{"quoted key at the start", redactColon, `"password": "hunter2hunter2"`, "hunter2hunter2", `"password": "`},
		{"unquoted key at the start", redactColon, `password": "hunter2hunter2"`, "", `password": "hunter2hunter2"`},
		{"dotted quoted key", redactColon, `{"db.password": "hunter2hunter2"}`, "hunter2hunter2", `"db.password": "`},
		{"64-character key", redactColon, `{"` + name64 + `": "hunter2hunter2"}`, "hunter2hunter2", name64},
		{"65-character key", redactColon, `{"x` + name64 + `": "hunter2hunter2"}`, "", "hunter2hunter2"},
		{"one-word credential before a quote", redactColon, `Authorization: s3cr3tvalue123 'x'`, "s3cr3tvalue123", "Authorization: "},
		{"scheme glued to its credential", redactColon, `Authorization: abc/def1234567890`, "abc", "Authorization: "},
		{"a second, masked credential", redactColon, "Authorization: Bearer abcdefghijklmnop1234\nAuthorization: Bearer " + maskedCred,
			"abcdefghijklmnop1234", "\nAuthorization: Bearer " + maskedCred},
		{"lowercase name after a space", redactAssignments, `db password=hunter2hunter2`, "hunter2hunter2", "db password="},
		{"query parameter after &", redactAssignments, `https://example.com/cb?state=1&password=hunter2hunter2`, "", "&password=hunter2hunter2"},
		{"quoted one-character value", redactAssignments, `PASSWORD="x" rest`, `"x"`, `PASSWORD="`},
	}
	for _, c := range cases {
		out := c.redact(c.in)
		if c.secret != "" && strings.Contains(out, c.secret) {
			t.Errorf("%s: %q kept %q: %q", c.what, c.in, c.secret, out)
		}
		if !strings.Contains(out, c.kept) {
			t.Errorf("%s: %q lost %q: %q", c.what, c.in, c.kept, out)
		}
	}
}

// TestColonPatternsExactly: the ':' patterns' outputs, whole, at the
// edges a generated mutant moved: a bytes repr value (b"", B”), a "b"
// that ends the text, an Authorization value with a leading space or a
// scheme word, Telegram tokens at their least digits and characters and
// one short of each, and a DSN whose password is empty (alone, and
// before one whose password is not).
func TestColonPatternsExactly(t *testing.T) {
	a30 := strings.Repeat("A", 30)
	for _, c := range []struct{ in, want string }{
		{`{"password": b`, `{"password": b`},
		{`{'password': b"hunter2hunter2"}`, `{'password': b"***"}`},
		{`{'password': B'hunter2hunter2'}`, `{'password': B'***'}`},
		{`{"Authorization": " abcdefghijkl123456"}`, `{"Authorization": " abcde...3456"}`},
		{`{"Authorization": "Bearer abcdefghijkl123456"}`, `{"Authorization": "Bearer abcdef...3456"}`},
		{"bot12345678:" + a30, "bot12345678:***"},
		{"bot1234567:" + a30, "bot1234567:" + a30},
		{"bot12345678:" + a30[:29], "bot12345678:" + a30[:29]},
		{"bot12345678:" + a30[:28], "bot12345678:" + a30[:28]},
		{`postgres://user:@db.example.com/x hunter2hunter2`, `postgres://user:@db.example.com/x hunter2hunter2`},
		{`postgres://user:hunter2hunter2@db.example.com/x`, `postgres://user:***@db.example.com/x`},
		{`postgres://u:@h postgres://v:hunter2hunter2@db`, `postgres://u:@h postgres://v:***@db`},
	} {
		if got := redactColon(c.in); got != c.want {
			t.Errorf("redactColon(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
