//go:build !linux

package kernel

import (
	"fmt"
	"os"
)

const helperEnv = "KERNPOOL_KERNEL_TEST_HELPER"

// runHelper: the host-death helper needs Linux (Pdeathsig, /proc).
func runHelper(mode string) int {
	fmt.Fprintln(os.Stderr, "helper mode", mode, "needs linux")
	return 2
}
