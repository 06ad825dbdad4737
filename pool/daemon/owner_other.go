//go:build !unix

package daemon

import "io/fs"

// ownedByUs: without uids (Windows) the user's own dirs are the daemon's.
func ownedByUs(fs.FileInfo) bool { return true }
