//go:build windows

package main

// The shell that runs --tool-handler commands.
const (
	shellName = "cmd"
	shellFlag = "/C"
)
