//go:build unix && !linux

package kernel

import (
	"errors"
	"syscall"
)

// groupLive says whether process group pgid has members (zombies included:
// without /proc they cannot be told apart).
func groupLive(pgid int) (bool, error) {
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false, err
	}
	return true, nil
}
