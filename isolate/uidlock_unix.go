//go:build unix

package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// errUIDHeld: another daemon (or another pool of this one) leases the uid.
var errUIDHeld = errors.New("uid leased elsewhere")

func uidLockPath(dir string, uid int) string {
	return filepath.Join(dir, strconv.Itoa(uid)+".lock")
}

// lockUID takes an exclusive, non-blocking flock on <dir>/<uid>.lock. The
// kernel drops it when the holder closes it or dies, however it dies.
func lockUID(dir string, uid int) (io.Closer, error) {
	f, err := os.OpenFile(uidLockPath(dir, uid), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
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

// uidLastUsed is when uid was last leased or released on this host (the
// mtime of its lock file); zero when it never was.
func uidLastUsed(dir string, uid int) time.Time {
	var st unix.Stat_t
	if err := unix.Lstat(uidLockPath(dir, uid), &st); err != nil {
		return time.Time{}
	}
	return time.Unix(st.Mtim.Unix())
}

// touchUID records that uid was used now (best effort: a failure only
// makes the LRU order less exact, never a lease unsafe).
func touchUID(dir string, uid int) {
	now := time.Now()
	_ = os.Chtimes(uidLockPath(dir, uid), now, now)
}
