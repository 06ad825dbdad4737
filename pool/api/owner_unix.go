//go:build unix

package api

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkDirOwner refuses a socket dir owned by another unprivileged user:
// its owner could replace the socket and impersonate the daemon.
func checkDirOwner(dir string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := int(st.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("listen: %w: socket dir %s belongs to uid %d, not to this user or root", ErrSocket, dir, uid)
	}
	return nil
}
