//go:build linux && !amd64

package kinit

// reaperImage: no reaper for this architecture; the init keeps its Go
// supervisor.
func reaperImage() []byte { return nil }
