//go:build windows

package main

import (
	"context"
	"os/exec"
)

// handlerCommand runs one --tool-handler command via cmd /C; a canceled
// call kills it (WaitDelay bounds the wait for what it started).
func handlerCommand(ctx context.Context, cmdline string) *exec.Cmd {
	return exec.CommandContext(ctx, "cmd", "/C", cmdline)
}
