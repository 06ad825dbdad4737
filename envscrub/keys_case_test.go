package envscrub

import (
	"strings"
	"testing"
)

// The ASCII letter range ends count: a name whose only lowercase letter is
// 'a' or 'z' is prose-like (only a whole secret word makes it secret), and
// 'z' folds to 'Z' when matching a secret word (authorization).
func TestKeyCaseRangeEnds(t *testing.T) {
	for _, c := range []struct {
		name           string
		secret, strong bool
	}{
		{"MONKEYa", false, false},
		{"MONKEYz", false, false},
		{"MONKEYA", true, false},
		{"authorization", true, true},
		{"x-authorization", true, true},
		{"Z_TOKEN", true, false},
	} {
		if secret, strong := keyIsSecret(c.name); secret != c.secret || strong != c.strong {
			t.Errorf("keyIsSecret(%q) = %v, %v; want %v, %v", c.name, secret, strong, c.secret, c.strong)
		}
	}
	f := NewPipeline(OutputConfig{}).Filter(nil)
	if out := f.Clean("authorization=q8Zr2LmW9xVt4Kp7\n"); strings.Contains(out, "q8Zr2LmW9xVt4Kp7") {
		t.Errorf("authorization= value shown: %q", out)
	}
}

// A value that names a variable is not masked, a lone '$' or one with a
// character no name has is; written out per case.
func TestReferenceValues(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter(nil)
	for in, want := range map[string]string{
		"API_KEY=${API_KEY}\n":   "API_KEY=${API_KEY}\n",
		"SECRET=${}\n":           "SECRET=${}\n",
		"TOKEN=$GITHUB_TOKEN\n":  "TOKEN=$GITHUB_TOKEN\n",
		"PASSWORD=$\n":           "PASSWORD=***\n",
		"PASSWORD=${a{b}\n":      "PASSWORD=***\n",
		"PASSWORD=$x-y\n":        "PASSWORD=***\n",
		"authorization=$OTHER\n": "authorization=$OTHER\n",
	} {
		if got := f.Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// An upper-case Authorization header or quoted key masks its credential
// after the scheme ('A' folds to 'a' like every other letter).
func TestUpperCaseAuthorization(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter(nil)
	for in, want := range map[string]string{
		"AUTHORIZATION: Basic dXNlcjpwYXNzd29yZA==\n":   "AUTHORIZATION: Basic dXNlcj...ZA==\n",
		"{\"AUTHORIZATION\": \"Basic dXNlcjpwYXNz\"}\n": "{\"AUTHORIZATION\": \"Basic ***\"}\n",
	} {
		if got := f.Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}
