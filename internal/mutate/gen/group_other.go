//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// ownGroup: no process groups here; a cancel kills the binary alone.
func ownGroup(*exec.Cmd) {}

// lockFile only creates path here: no flock.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
}
