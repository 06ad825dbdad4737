//go:build unix

package kernel

import (
	"os"
	"syscall"
)

// fileID is fi's device and inode, which the runner compares with what it
// sees (0, 0: unknown, not compared).
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
