//go:build unix

package kernel

import (
	"errors"
	"syscall"
)

// groupLive says whether process group pgid has a member that is not a
// zombie. kill(-pgid, 0) alone also counts zombies; where the platform can
// tell them apart, groupRuns does.
func groupLive(pgid int) (bool, error) {
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false, err
	}
	return groupRuns(pgid), nil
}
