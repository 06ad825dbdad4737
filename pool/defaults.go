package pool

import (
	"context"
	"errors"
	"strings"
)

// errNoToolHandler is what a cell's tool call gets when its request
// carried no ToolHandler.
var errNoToolHandler = errors.New("tool calls are not available for this request: it has no tool handler")

// refuseTools answers every tool call with an error.
type refuseTools struct{}

func (refuseTools) HandleTool(context.Context, ToolCall) (string, error) {
	return "", errNoToolHandler
}

// identityFilter is the OutputFilter of a pool without an Output factory:
// text passes unchanged, nothing is capped or spilled.
type identityFilter struct{}

func (identityFilter) Clean(text string) string { return text }

func (identityFilter) Finish(stdout, stderr, _ string, _ int) (CellOutput, error) {
	return CellOutput{
		Stdout:           stdout,
		Stderr:           stderr,
		StdoutBytesTotal: len(stdout),
		StderrBytesTotal: len(stderr),
	}, nil
}

// minimalEnvNames are the daemon variables a kernel inherits when the pool
// has no EnvBuilder. None of them carries a credential.
var minimalEnvNames = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "SHELL"}

// windowsEnvNames are needed for a Python child to start on Windows
// (without them it fails with WinError 10106); compared upper-cased.
var windowsEnvNames = []string{
	"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "OS", "PROCESSOR_ARCHITECTURE",
	"NUMBER_OF_PROCESSORS", "PUBLIC", "ALLUSERSPROFILE", "PROGRAMDATA", "PROGRAMFILES",
	"PROGRAMFILES(X86)", "PROGRAMW6432", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "USERDOMAIN",
	"USERNAME", "HOMEDRIVE", "HOMEPATH", "COMPUTERNAME",
}

// minimalEnv filters environ (os.Environ's form) down to the names above
// plus LC_*; on Windows names compare case-insensitively and the Windows
// essentials are kept too.
func minimalEnv(environ []string, goos string) []string {
	windows := goos == "windows"
	keep := make(map[string]bool, len(minimalEnvNames)+len(windowsEnvNames))
	for _, n := range minimalEnvNames {
		keep[n] = true
	}
	if windows {
		for _, n := range windowsEnvNames {
			keep[n] = true
		}
	}
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		cmp := name
		if windows {
			cmp = strings.ToUpper(name)
		}
		if keep[cmp] || strings.HasPrefix(cmp, "LC_") {
			out = append(out, kv)
		}
	}
	return out
}
