package envscrub

import "testing"

// TestRedactionsCountOnePerSecret: Clean counts one redaction per secret
// it masks, whatever kind it is and however many passes see it (a DSN
// password that is also a provider token is masked by the token pass and
// again by the DSN pass: still one secret), and two secrets that touch
// count two.
func TestRedactionsCountOnePerSecret(t *testing.T) {
	const (
		ant  = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
		ghp  = "ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
		aws  = "AKIAABCDEFGHIJKLMNOP"
		jwt  = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
		pem  = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
		kept = "a-known-secret-value-42"
	)
	cases := []struct {
		name, in string
		want     int
	}{
		{"anthropic key", "key " + ant + " end", 1},
		{"github token", ghp, 1},
		{"aws key id", aws, 1},
		{"assignment", "DB_PASSWORD=hunter2hunter2", 1},
		{"assignment of a token", "ANTHROPIC_API_KEY=" + ant, 1},
		{"bearer header", "Authorization: Bearer " + ant, 1},
		{"json key", `{"api_key": "` + ant + `"}`, 1},
		{"jwt", "token " + jwt, 1},
		{"private key", pem, 1},
		{"dsn password", "postgres://user:pa55word@db/x", 1},
		{"dsn password that is a token", "postgres://user:" + ant + "@db/x", 1},
		{"known secret", "value " + kept + " here", 1},
		{"known secret in an assignment", "MY_TOKEN=" + kept, 1},
		{"two secrets", ant + " and " + ghp, 2},
		{"two secrets in a dsn and a header", "postgres://user:" + ant + "@db/x\nAuthorization: Bearer " + ghp, 2},
		{"one secret twice", ant + "\n" + ant, 2},
		// Two secrets touching: the token pass's edit starts where the
		// exact mask ends, or ends where it starts, and overlaps neither.
		{"known secret touching a token after it", kept + ghp, 2},
		{"token touching a known secret after it", ghp + kept, 2},
		{"no secret", "hello world", 0},
	}
	p := NewPipeline(OutputConfig{})
	for _, c := range cases {
		f := p.Filter([]string{kept})
		out := f.Clean(c.in)
		if got := f.TakeRedactions(); got != c.want {
			t.Errorf("%s: %q -> %q counts %d redactions, want %d", c.name, c.in, out, got, c.want)
		}
		if got := f.TakeRedactions(); got != 0 {
			t.Errorf("%s: a second TakeRedactions gives %d, want 0", c.name, got)
		}
	}
}
