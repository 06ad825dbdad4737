//go:build !unix

package api

import "io/fs"

// checkDirOwner has no uid to compare where there is no unix ownership;
// the directory's ACLs are the operator's responsibility.
func checkDirOwner(string, fs.FileInfo) error { return nil }
