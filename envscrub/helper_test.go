package envscrub

import (
	"fmt"
	"os"
)

// helperEnv re-executes the test binary as a child that runs one named
// scenario (the helper-process trick), e.g. inside a private mount
// namespace.
const helperEnv = "ENVSCRUB_TEST_HELPER"

// runHelper runs the scenario named by helperEnv and returns the exit code.
func runHelper() int {
	switch os.Getenv(helperEnv) {
	case "fulldisk":
		return helperFullDisk(os.Getenv("ENVSCRUB_TEST_DIR"))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper")
		return 2
	}
}
