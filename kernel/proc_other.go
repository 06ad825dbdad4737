//go:build !unix && !windows

package kernel

import (
	"fmt"
	"os"
	"os/exec"
)

// groupSandbox refuses to start kernels where processes cannot be confined.
type groupSandbox struct{}

func newGroupSandbox() Sandbox { return groupSandbox{} }

func (groupSandbox) Prepare(*exec.Cmd, string) error {
	return fmt.Errorf("process group sandbox: %w", ErrUnsupported)
}
func (groupSandbox) Started(int) error         { return nil }
func (groupSandbox) Kill() error               { return nil }
func (groupSandbox) Release() (Verdict, error) { return Verdict{}, nil }
func (groupSandbox) Stats() (Stats, error)     { return Stats{}, nil }
func (groupSandbox) UID() int                  { return -1 }

func hardenProcAttr(*exec.Cmd) {}

func exitStatus(ps *os.ProcessState) (code int, signal string) { return ps.ExitCode(), "" }
