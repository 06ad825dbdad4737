package envscrub

import "strings"

// secretSubstrings are parity §1 rule 2, matched against the upper-cased
// name and indexed by their first byte, so that secretSubstring dispatches
// on one byte (it runs for every key of the output). PASS alone is
// deliberately absent: it would drop BYPASS_CACHE and COMPASS_DIR, while
// PASSWORD and PASSWD cover the credentials.
var secretSubstrings = [256][]string{
	'K': {"KEY"},
	'T': {"TOKEN"},
	'S': {"SECRET"},
	'P': {"PASSWORD", "PASSWD"},
	'C': {"CREDENTIAL", "CREDS"},
	'A': {"AUTH", "APIKEY"},
	'D': {"DSN"},
	'W': {"WEBHOOK"},
	'B': {"BEARER"},
}

// safePrefixes are parity §1 rule 3 (case-sensitive startswith).
var safePrefixes = [...]string{
	"PATH", "HOME", "USER", "LANG", "LC_", "TERM", "TMPDIR", "TMP", "TEMP",
	"SHELL", "LOGNAME", "XDG_", "PYTHONPATH", "VIRTUAL_ENV", "CONDA",
}

// windowsEssentials are parity §1 rule 4: without them a Python child on
// Windows cannot create a socket (WinError 10106) or find cmd.exe.
var windowsEssentials = map[string]bool{
	"SYSTEMROOT": true, "SYSTEMDRIVE": true, "WINDIR": true, "COMSPEC": true,
	"PATHEXT": true, "OS": true, "PROCESSOR_ARCHITECTURE": true,
	"NUMBER_OF_PROCESSORS": true, "PUBLIC": true, "ALLUSERSPROFILE": true,
	"PROGRAMDATA": true, "PROGRAMFILES": true, "PROGRAMFILES(X86)": true,
	"PROGRAMW6432": true, "APPDATA": true, "LOCALAPPDATA": true,
	"USERPROFILE": true, "USERDOMAIN": true, "USERNAME": true,
	"HOMEDRIVE": true, "HOMEPATH": true, "COMPUTERNAME": true,
}

// reservedPrefix names the kernel's own variables; a passthrough may never
// shadow them (a forged KERNPOOL_SENTINEL would let a parent variable frame
// replies).
const reservedPrefix = "KERNPOOL_"

// IsSecretName reports whether name is secret by parity §1 rule 2: its
// upper-cased form contains one of the secret substrings.
func IsSecretName(name string) bool {
	return secretSubstring(strings.ToUpper(name)) != ""
}

// secretSubstring returns a secret substring upper contains, or "". One
// pass dispatching on the byte, since it runs for every key of the output.
func secretSubstring(upper string) string {
	for i := 0; i < len(upper); i++ {
		for _, c := range secretSubstrings[upper[i]] {
			if strings.HasPrefix(upper[i:], c) {
				return c
			}
		}
	}
	return ""
}

// hasSafePrefix is rule 3. On Windows, where variable names are
// case-insensitive, the upper-cased name is compared as well: the reference
// drops the mixed-case Path that Windows itself uses (its open bug).
func hasSafePrefix(name string, windows bool) bool {
	for _, p := range safePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	if windows {
		upper := strings.ToUpper(name)
		for _, p := range safePrefixes {
			if strings.HasPrefix(upper, p) {
				return true
			}
		}
	}
	return false
}

// verdict is what the rules decided for one variable name.
type verdict int

const (
	keepPassthrough verdict = iota
	keepSafe
	keepWindows
	dropRefused
	dropSecret
	dropOther
)

func (v verdict) kept() bool { return v <= keepWindows }

// String names the rule, for logs.
func (v verdict) String() string {
	switch v {
	case keepPassthrough:
		return "passthrough"
	case keepSafe:
		return "safe-prefix"
	case keepWindows:
		return "windows-essential"
	case dropRefused:
		return "refused"
	case dropSecret:
		return "secret-name"
	default:
		return "not-allowed"
	}
}
