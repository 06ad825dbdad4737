//go:build !unix

package main

import "os/exec"

// ownGroup: no process groups here; a cancel kills the binary alone.
func ownGroup(*exec.Cmd) {}
