package envscrub

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckEnvNames: a request's own variable names are judged by the
// refusal list and by secret substrings unless a passthrough list of the
// scrubber or of the request's mode names them; every bad name is
// reported, and a plain name or a listed one passes. A mode lists more
// names than the scrubber itself, as a profile's list may.
func TestCheckEnvNames(t *testing.T) {
	s, err := New(Config{Passthrough: []string{"MY_SERVICE_TOKEN"}, ModePassthrough: map[string][]string{"web": {"WEB_PASSWORD", "WEB_TOKEN", "WEB_API_KEY"}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mode  string
		names []string
		bad   []string // each named in the error; none: no error
	}{
		{"default", []string{"PLAIN", "lower_case", "MY_SERVICE_TOKEN"}, nil},
		{"web", []string{"WEB_PASSWORD", "WEB_API_KEY", "MY_SERVICE_TOKEN"}, nil},
		{"default", []string{"WEB_PASSWORD"}, []string{"WEB_PASSWORD"}}, // listed for another mode only
		{"default", []string{"db_password", "PLAIN"}, []string{"db_password"}},
		{"web", []string{"OPENAI_API_KEY"}, []string{"OPENAI_API_KEY"}}, // refused, whatever lists it
		{"default", []string{"KERNPOOL_X", "A_SECRET", "OK"}, []string{"KERNPOOL_X", "A_SECRET"}},
	}
	for _, c := range cases {
		err := s.CheckEnvNames(c.mode, c.names)
		if len(c.bad) == 0 {
			if err != nil {
				t.Errorf("%s %v: %v, want no error", c.mode, c.names, err)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s %v: %v, want ErrRefused", c.mode, c.names, err)
			continue
		}
		if n := len(strings.Split(err.Error(), "\n")); n != len(c.bad) {
			t.Errorf("%s %v: %d errors (%v), want %d", c.mode, c.names, n, err, len(c.bad))
		}
		for _, b := range c.bad {
			if !strings.Contains(err.Error(), `"`+b+`"`) {
				t.Errorf("%s %v: %v does not name %s", c.mode, c.names, err, b)
			}
		}
	}
}
