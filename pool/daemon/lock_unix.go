//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockStateDir takes an exclusive, non-blocking flock on the state dir's
// lock file, so that two daemons never share (and sweep) one state dir.
// The kernel releases it when the daemon dies, however it dies.
func lockStateDir(stateDir string) (unlock func(), err error) {
	path := filepath.Join(stateDir, stateLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w on the state dir %s", ErrAlreadyServing, stateDir)
		}
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
