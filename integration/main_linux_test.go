//go:build integration && linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
)

// kernpoolBin is the binary under test, set by TestMain.
var kernpoolBin string //nolint:gochecknoglobals // set once by TestMain, read-only after

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("KERNPOOL_BIN"); bin != "" {
		kernpoolBin = bin
	} else if os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "kernpool-it-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		kernpoolBin = filepath.Join(dir, "kernpool")
		// Both binaries, as installed: the daemon runs kernpool-init beside it.
		build := exec.Command("go", "build", "-o", dir+"/", "github.com/kernpool/kernpool/cmd/kernpool", "github.com/kernpool/kernpool/cmd/kernpool-init")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: building ./cmd/kernpool failed:", err)
			return 2
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: goroutine leak:", err)
			return 1
		}
	}
	return code
}

// requireDaemon skips unless the suite can run a real daemon: root
// (kernpool creates cgroups and per-kernel users), the binary and python.
func requireDaemon(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	if kernpoolBin == "" {
		t.Skip("no kernpool binary (set KERNPOOL_BIN or run as root with go on PATH)")
	}
	testenv.RequirePython(t)
}

// requireVM skips tests that are destructive by design (they could hit
// processes outside the test if the sandbox were broken) unless they run in
// the disposable VM of integration/vm/run.
func requireVM(t *testing.T) {
	t.Helper()
	if os.Getenv("KERNPOOL_IN_VM") != "1" {
		t.Skip("destructive: runs only inside integration/vm/run (KERNPOOL_IN_VM=1)")
	}
}
