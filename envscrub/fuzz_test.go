package envscrub

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func redactSeeds() []string {
	return []string{
		"plain text", "sk-proj-abcdefghijklmnopqrstuvwxyz0123", "x-api-key: abcdefghijklmnop",
		"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcd",
		"postgres://u:pw@h/db https://abcdefgh1234@github.com", "DB_PASSWORD=hunter2 MAX_TOKENS=100",
		"{'OPENAI_API_KEY': 'abcdefgh12345678XYZ'}", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----",
		"\x1b[31mghp_0123456789abcdefghij\x1b[0m", "\u009b31m\u009d0;x\x07", `"a\nghp_0123456789abcdefghij"`,
		strings.Repeat("a1", 16) + ".AbCdEfGhIjKlMnOpQr", "TOKEN=ftp://abcdefghijklmnop@host", "\xff\xfe invalid",
	}
}

// FuzzRedact: Clean never panics, never emits a known secret, is
// idempotent, and the fast prefix scan equals the reference scan.
func FuzzRedact(f *testing.F) {
	for _, s := range redactSeeds() {
		f.Add(s, "hunter2hunter2")
		f.Add(s, "a***b.c[d")
	}
	f.Fuzz(func(t *testing.T, text, secret string) {
		filter := NewPipeline(OutputConfig{}).Filter([]string{secret})
		out := filter.Clean(text)
		if len(secret) >= MinSecretLen && utf8.ValidString(secret) && strings.Contains(out, secret) {
			t.Fatalf("secret %q survives in %q", secret, out)
		}
		if again := filter.Clean(out); again != out {
			t.Fatalf("not idempotent:\n  in  %q\n  1st %q\n  2nd %q", text, out, again)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out: %q", out)
		}
		if plain := cleanNoReuse(filter, text); plain != out {
			t.Fatalf("buffer reuse changed the result:\n  in    %q\n  reuse %q\n  plain %q", text, out, plain)
		}
		if fast, ref := redactPrefixTokens(text), refPrefixTokens(text); fast != ref {
			t.Fatalf("prefix scan differs:\n  in   %q\n  fast %q\n  ref  %q", text, fast, ref)
		}
		off := NewPipeline(OutputConfig{DisablePatternRedaction: true}).Filter([]string{secret})
		if o := off.Clean(text); len(secret) >= MinSecretLen && utf8.ValidString(secret) && strings.Contains(o, secret) {
			t.Fatalf("patterns off: secret %q survives in %q", secret, o)
		}
	})
}

// FuzzStripANSI: never panics, leaves no ESC and no C1 code point, never
// grows valid text, and is idempotent.
func FuzzStripANSI(f *testing.F) {
	for _, s := range []string{
		"\x1b[31mred\x1b[0m", "\x1b]0;t\x07", "\x1b]8;;u\x1b\\l", "\x1bPq\x1b\\", "\x1b(B", "\x1b7",
		"\x1b\x1b[31mX", "\u009b1m", "\u009dx\u009c", "\u0085", "\x1b", "\x1b]", "a\xc2", "\xc2\x9b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := StripANSI(s)
		if strings.IndexByte(out, 0x1b) >= 0 || indexC1(out) >= 0 {
			t.Fatalf("escape left: %q -> %q", s, out)
		}
		if utf8.ValidString(s) && len(out) > len(s) {
			t.Fatalf("grew: %q -> %q", s, out)
		}
		if again := StripANSI(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}
