//go:build !linux

package kernel

import "testing"

// cpuMeter reports CPU time per op on Linux only.
type cpuMeter struct{}

func startCPU(int) *cpuMeter        { return &cpuMeter{} }
func (*cpuMeter) report(*testing.B) {}
