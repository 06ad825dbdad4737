package pool

import (
	"context"
	"strings"
)

// refuseTools answers every tool call with an error.
type refuseTools struct{}

func (refuseTools) HandleTool(context.Context, ToolCall) (string, error) {
	return "", errNoToolHandler
}

// identityFilter is the OutputFilter of a pool without an Output factory:
// text passes unchanged, nothing is capped or spilled.
type identityFilter struct{}

func (identityFilter) Clean(text string) string { return text }

// CapText passes text unchanged: without a filter only the kernel's own
// caps (kernel.TracebackBytes) bound it.
func (identityFilter) CapText(text string) string { return text }

func (identityFilter) Finish(stdout, stderr, _ string, _ int) (CellOutput, error) {
	return CellOutput{
		Stdout:           stdout,
		Stderr:           stderr,
		StdoutBytesTotal: len(stdout),
		StderrBytesTotal: len(stderr),
	}, nil
}

// minimalEnv filters environ (os.Environ's form) down to minimalName's
// names; on Windows names compare case-insensitively and the Windows
// essentials are kept too.
func minimalEnv(environ []string, goos string) []string {
	windows := goos == "windows"
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
		if minimalName(cmp) || windows && windowsName(cmp) {
			out = append(out, kv)
		}
	}
	return out
}

// minimalName reports the daemon variables a kernel inherits when the pool
// has no EnvBuilder. None of them carries a credential.
func minimalName(name string) bool {
	switch name {
	case "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "SHELL":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// windowsName reports the variables a Python child needs to start on
// Windows (without them it fails with WinError 10106); name is upper-cased.
func windowsName(name string) bool {
	switch name {
	case "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "OS", "PROCESSOR_ARCHITECTURE",
		"NUMBER_OF_PROCESSORS", "PUBLIC", "ALLUSERSPROFILE", "PROGRAMDATA", "PROGRAMFILES",
		"PROGRAMFILES(X86)", "PROGRAMW6432", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "USERDOMAIN",
		"USERNAME", "HOMEDRIVE", "HOMEPATH", "COMPUTERNAME":
		return true
	}
	return false
}
