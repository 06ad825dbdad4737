package envscrub

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestScrubbedValuesAtMinSecretLen: a dropped secret value, and a
// password inside a dropped URL, of exactly MinSecretLen (8) bytes is
// remembered, so the output masks it; one byte shorter is not. (gremlins:
// both >= lived as >, and an 8-byte password printed by a cell left the
// daemon as it was.)
func TestScrubbedValuesAtMinSecretLen(t *testing.T) {
	s := newTestScrubber(t, Config{},
		"EIGHT_TOKEN=abcd1234",                    // secret by name, 8 bytes
		"SEVEN_TOKEN=abcd123",                     // 7 bytes
		"DATABASE_URL=postgres://app:pw8bytes@db", // dropped by rule 5: the 8-byte password
		"REPLICA_URL=postgres://app:pw7byte@db",   // a 7-byte password
	)
	_, scrubbed, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"abcd1234", "pw8bytes"}
	if !slices.Equal(scrubbed, want) {
		t.Fatalf("scrubbed = %q, want %q", scrubbed, want)
	}
	f := NewPipeline(OutputConfig{DisablePatternRedaction: true}).Filter(scrubbed)
	if got := f.Clean("token abcd1234, password pw8bytes"); got != "token ***, password ***" {
		t.Errorf("Clean with the scrubbed values = %q", got)
	}
}

// TestBuildModeListLongerThanGlobal: a mode's passthrough list longer than
// the global one (none here) and no request names still builds (gremlins:
// the size hint global - mode + request went negative and make panicked,
// which no test saw: every mode list in them was no longer than the
// global one plus the request's).
func TestBuildModeListLongerThanGlobal(t *testing.T) {
	s := newTestScrubber(t, Config{ModePassthrough: map[string][]string{"web": {"TOOL_ONE", "TOOL_TWO"}}},
		"TOOL_ONE=1", "TOOL_TWO=2", "PATH=/usr/bin")
	env, _, err := s.Build("web", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := envMap(env)
	if m["TOOL_ONE"] != "1" || m["TOOL_TWO"] != "2" {
		t.Errorf("env %s lacks the mode's names", strings.Join(env, " "))
	}
}

// TestDroppedNamesLogOnlyRulesThatDropped: the debug log has one line per
// rule that dropped something, none for a rule that dropped nothing.
// (gremlins: len(names) >= 0 lived, logging an empty list for every rule.)
func TestDroppedNamesLogOnlyRulesThatDropped(t *testing.T) {
	var buf strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf})
	s := newTestScrubber(t, Config{Logger: log}, "EDITOR=vim", "LANG=C")
	if _, _, err := s.Build("web", nil); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "dropped environment variables"); n != 1 || !strings.Contains(out, "EDITOR") {
		t.Errorf("want one line, for EDITOR, got %d:\n%s", n, out)
	}
	for _, rule := range []string{"rule=secret-name", "rule=refused"} {
		if strings.Contains(out, rule) {
			t.Errorf("a line for %s, which dropped nothing:\n%s", rule, out)
		}
	}
}
