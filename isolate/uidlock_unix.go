//go:build unix

package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errUIDHeld: another daemon (or another pool of this one) leases the uid.
var errUIDHeld = errors.New("isolate: uid leased elsewhere")

// lockUID takes an exclusive, non-blocking flock on <dir>/<uid>.lock. The
// kernel drops it when the holder closes it or dies, however it dies.
func lockUID(dir string, uid int) (io.Closer, error) {
	path := filepath.Join(dir, strconv.Itoa(uid)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock uid %d: %w", uid, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errUIDHeld
		}
		return nil, fmt.Errorf("lock uid %d: %w", uid, err)
	}
	return f, nil
}
