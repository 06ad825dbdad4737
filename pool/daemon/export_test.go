package daemon

import "github.com/kernpool/kernpool/fleet"

// WithMarksRegistry wraps the registry a fleet node writes its drain's
// save marks through (options.wrapMarks), for the tests' fault injection.
func WithMarksRegistry(wrap func(fleet.Registry) fleet.Registry) Option {
	return func(o *options) { o.wrapMarks = wrap }
}
