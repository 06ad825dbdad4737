//go:build unix

package daemon

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByUs reports whether fi belongs to the daemon's effective uid.
func ownedByUs(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
