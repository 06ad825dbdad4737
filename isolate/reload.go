package isolate

import (
	"fmt"
	"maps"
	"reflect"
	"sort"
)

// SetLimits replaces the profiles' resource limits and the ceiling for
// kernels created from now on (the daemon's SIGHUP reload); running
// kernels keep the limits they started with. Everything else about a
// profile (namespaces, private /tmp, ...) was checked against the host
// by New, so the set of profiles and those settings must stay the same:
// otherwise the call fails with ErrReload naming the profile and nothing
// changes.
func (i *Isolator) SetLimits(profiles map[string]Profile, ceiling Limits) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	cur := i.resolver()
	if err := sameShape(cur.Profiles, profiles); err != nil {
		return fmt.Errorf("set limits: %w", err)
	}
	next := *cur
	next.Profiles = maps.Clone(profiles)
	next.Ceiling = ceiling
	if err := next.validate(); err != nil {
		return fmt.Errorf("set limits: %w", err)
	}
	i.live.Store(&next)
	return nil
}

// sameShape reports, as an ErrReload error, a profile added, removed or
// changed in anything but its resources.
func sameShape(old, next map[string]Profile) error {
	names := make([]string, 0, len(next))
	for n := range next {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o, ok := old[n]
		if !ok {
			return fmt.Errorf("%w: profile %q is new", ErrReload, n)
		}
		a, b := o, next[n]
		a.Resources, b.Resources = nil, nil
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("%w: profile %q changes more than its limits", ErrReload, n)
		}
	}
	for n := range old {
		if _, ok := next[n]; !ok {
			return fmt.Errorf("%w: profile %q was removed", ErrReload, n)
		}
	}
	return nil
}
