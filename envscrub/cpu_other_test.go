//go:build !unix

package envscrub

import "time"

// processCPU is unknown here; the benchmark then reports wall time only.
func processCPU() time.Duration { return 0 }
