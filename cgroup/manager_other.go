//go:build !linux

package cgroup

// DetectMode reports ModeNone: cgroups exist only on Linux.
func DetectMode(mount string) Mode { return ModeNone }

// New fails with ErrUnsupported: cgroups exist only on Linux.
func New(cfg Config) (*Manager, error) {
	return nil, ErrUnsupported
}
