//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

type inodeKey struct{ dev, ino uint64 }

// inodeOf names a file with more than one link, to write its other
// paths as hard links.
func inodeOf(fi fs.FileInfo) (inodeKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return inodeKey{}, false
	}
	return inodeKey{dev: uint64(st.Dev), ino: st.Ino}, true //nolint:unconvert // Dev's type differs by OS
}

// owner is the file's uid and gid.
func owner(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return 0, 0
}
