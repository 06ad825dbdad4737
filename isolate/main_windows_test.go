//go:build windows

package isolate

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv selects a helper mode when the test binary re-executes itself
// as a fake kernel ("tree") or as that kernel's child ("leaf").
const helperEnv = "KERNPOOL_ISOLATE_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "tree":
		os.Exit(helperTree())
	case "leaf":
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// helperTree waits for a line on stdin (like the runner, which runs nothing
// before its first request, so the job is assigned first), starts a leaf
// child, prints the leaf's pid and sleeps until killed.
func helperTree() int {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 3
	}
	self, err := os.Executable()
	if err != nil {
		return 4
	}
	leaf := exec.Command(self, "-test.run=^$")
	leaf.Env = append(os.Environ(), helperEnv+"=leaf")
	if err := leaf.Start(); err != nil {
		return 5
	}
	fmt.Println(leaf.Process.Pid)
	time.Sleep(time.Hour)
	return 0
}
