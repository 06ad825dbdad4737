package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/kernpool/kernpool/pool/api"
)

// errorReport is a failed command as --json prints it: one JSON object on
// stderr, so a script that asked for JSON reads JSON whichever way the
// command ended.
type errorReport struct {
	// Error is the message, as the plain output's first line has it.
	Error string `json:"error"`
	// Code is the daemon's error code (docs/api.md) when the daemon answered.
	Code string `json:"code,omitempty"`
	// Hint says what to do about it.
	Hint string `json:"hint,omitempty"`
	// RetryAfterSeconds is the daemon's Retry-After (capacity, quota).
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
	// ExitCode is the command's exit code.
	ExitCode int `json:"exit_code"`
}

// fail reports that cmd failed with err and returns exit: "kernpool CMD:
// ERR" then the hint on its own line, or (e.json) the errorReport.
func fail(e *env, cmd string, err error, hint string, exit int) int {
	msg := fmt.Sprintf("kernpool %s: %v", cmd, err)
	if !e.json {
		fmt.Fprintln(e.stderr, msg)
		if hint != "" {
			fmt.Fprintln(e.stderr, hint)
		}
		return exit
	}
	r := errorReport{Error: msg, Hint: hint, ExitCode: exit}
	var ae *api.APIError
	if errors.As(err, &ae) {
		r.Code, r.RetryAfterSeconds = ae.Code, int(ae.RetryAfter.Seconds())
	}
	b, _ := json.Marshal(r)
	fmt.Fprintf(e.stderr, "%s\n", b)
	return exit
}

// connHint is what to do about a failed call to the daemon: a socket this
// user may not open needs the socket's group, not a daemon start.
func connHint(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return "This user may not open the daemon's socket: join the socket's group (socket_group in the config; docs/ops.md) or run as the daemon's user."
	case errors.Is(err, api.ErrUnavailable):
		return "Is the daemon running? Start it with 'kernpool serve' or pass --socket."
	}
	return ""
}
