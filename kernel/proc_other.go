//go:build !unix && !windows

package kernel

import (
	"fmt"
	"os"
	"os/exec"
)

// ProcessGroup refuses to start kernels where processes cannot be confined.
type ProcessGroup struct{}

// NewProcessGroup returns the (refusing) process-group sandbox.
func NewProcessGroup() *ProcessGroup { return &ProcessGroup{} }

func (*ProcessGroup) Prepare(*exec.Cmd, string) error {
	return fmt.Errorf("process group sandbox: %w", ErrUnsupported)
}
func (*ProcessGroup) Started(int) error         { return nil }
func (*ProcessGroup) Kill() error               { return nil }
func (*ProcessGroup) Release() (Verdict, error) { return Verdict{}, nil }
func (*ProcessGroup) Stats() (Stats, error)     { return Stats{}, nil }
func (*ProcessGroup) UID() int                  { return -1 }
func (*ProcessGroup) Isolation() Isolation {
	return Isolation{Mode: IsolationProcess, UID: -1, Namespaces: []string{}, Network: true}
}

func hardenProcAttr(*exec.Cmd) {}

func exitStatus(ps *os.ProcessState) (code int, signal string) { return ps.ExitCode(), "" }
