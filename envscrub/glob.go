package envscrub

import (
	"fmt"
	"strings"
)

// refusal is one entry of the refusal list: an exact name or a glob with
// '*' (any run, also empty) and '?' (one byte). Matching is on upper-cased
// names everywhere: on Windows getenv is case-insensitive, so refusing
// OPENAI_API_KEY must also refuse openai_api_key, and elsewhere refusing
// too much is the safe error.
type refusal struct {
	pattern string // upper-cased
	glob    bool
}

func newRefusal(p string) (refusal, error) {
	if err := checkName(strings.NewReplacer("*", "", "?", "").Replace(p) + "X"); err != nil || p == "" {
		return refusal{}, fmt.Errorf("refusal pattern %q: %w", p, ErrInvalidName)
	}
	return refusal{pattern: strings.ToUpper(p), glob: strings.ContainsAny(p, "*?")}, nil
}

func (r refusal) match(upper string) bool {
	if !r.glob {
		return upper == r.pattern
	}
	return globMatch(r.pattern, upper)
}

// globMatch matches '*' and '?' iteratively (linear backtracking on the
// last star), so no pattern can blow up.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// checkName rejects what cannot be an environment variable name.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '=', c == 0, c == ' ', c == '\t', c == '\n', c == '\r':
			return fmt.Errorf("name %q: %w", name, ErrInvalidName)
		}
	}
	return nil
}
