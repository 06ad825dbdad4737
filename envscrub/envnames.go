package envscrub

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CheckEnvNames judges the names of a request's own environment values
// (pool's Request.Env and SessionSpec.Env), which come from the caller,
// not from the daemon's environment: a name the refusal list refuses
// (parity §1 rule 6), or one secret by name (rule 2) that neither the
// global passthrough nor mode's lists, is an error wrapping ErrRefused.
// Every bad name is reported, joined.
func (s *Scrubber) CheckEnvNames(mode string, names []string) error {
	allowed := make(map[string]bool, len(s.global)+len(s.perMode[mode]))
	for _, n := range slices.Concat(s.global, s.perMode[mode]) {
		allowed[s.fold(n)] = true
	}
	var errs []error
	for _, n := range names {
		upper := strings.ToUpper(n)
		if rule := s.refusedBy(upper); rule != "" {
			errs = append(errs, fmt.Errorf("env %q %w by %s", n, ErrRefused, rule))
			continue
		}
		if sub := secretSubstring(upper); sub != "" && !allowed[s.fold(n)] {
			errs = append(errs, fmt.Errorf("env %q %w: its name contains %q, and the profile's passthrough does not list it", n, ErrRefused, sub))
		}
	}
	return errors.Join(errs...)
}
