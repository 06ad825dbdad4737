//go:build !linux

package cgroup

import "fmt"

// DetectMode reports ModeNone: cgroups exist only on Linux.
func DetectMode(mount string) Mode { return ModeNone }

// New fails with ErrUnsupported: cgroups exist only on Linux.
func New(cfg Config) (*Manager, error) {
	return nil, fmt.Errorf("cgroup: new: %w", ErrUnsupported)
}
