package envscrub

import "strings"

// Which keys of NAME=value assignments and quoted "NAME": "value" pairs
// hold secrets. An environment-style name (no lowercase letter) is secret
// by parity §1 rule 2, so a `.env` dump or `env` listing is masked, also on
// code output (the reference skips it there: its open bug). A name with
// lowercase letters counts only when one of its '_'/'-'/'.' separated words
// is a secret word, so prose and code words that merely contain one
// (monkey, author, keyboard, tokenizer) stay untouched.

// secretWordList are the rule-2 words as whole components (upper-case).
var secretWordList = [...]string{
	"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "CREDENTIALS", "PASSWD",
	"AUTH", "DSN", "WEBHOOK", "CREDS", "BEARER", "APIKEY", "AUTHORIZATION",
}

// keyIsSecret reports whether name holds a secret and whether any value of
// it is secret (strong) or only an opaque-looking one. KEY and TOKEN alone
// are ambiguous (MAX_TOKENS=100, SORT_KEY=name): such a key's value must
// also look like a credential; the other rule-2 substrings and the
// compounds API_KEY, ACCESS_KEY, PRIVATE_KEY, ACCESS_TOKEN, REFRESH_TOKEN,
// SESSION_TOKEN, ID_TOKEN are strong. It does not allocate: it runs for
// every name before an '=' or ':' of the output.
func keyIsSecret(name string) (secret, strong bool) {
	if hasLower(name) && !hasSecretWord(name) {
		return false, false
	}
	switch keyStrength(name) {
	case keyStrong:
		return true, true
	case keyAmbiguous:
		return true, false
	}
	return false, false
}

const (
	keyNone = iota
	keyAmbiguous
	keyStrong
)

// keyStrength scans name once, ignoring ASCII case.
func keyStrength(name string) int {
	found := keyNone
	for i := 0; i < len(name); i++ {
		rest := name[i:]
		switch upperASCII(name[i]) {
		case 'K':
			if hasPrefixFold(rest, "KEY") {
				if strongCompound(name[:i], "API_", "API-", "API", "ACCESS_", "PRIVATE_") {
					return keyStrong
				}
				found = keyAmbiguous
			}
		case 'T':
			if hasPrefixFold(rest, "TOKEN") {
				if strongCompound(name[:i], "ACCESS_", "REFRESH_", "SESSION_", "ID_") {
					return keyStrong
				}
				found = keyAmbiguous
			}
		case 'S':
			if hasPrefixFold(rest, "SECRET") {
				return keyStrong
			}
		case 'P':
			if hasPrefixFold(rest, "PASSWORD") || hasPrefixFold(rest, "PASSWD") {
				return keyStrong
			}
		case 'C':
			if hasPrefixFold(rest, "CREDENTIAL") || hasPrefixFold(rest, "CREDS") {
				return keyStrong
			}
		case 'A':
			if hasPrefixFold(rest, "AUTH") || hasPrefixFold(rest, "APIKEY") {
				return keyStrong
			}
		case 'D':
			if hasPrefixFold(rest, "DSN") {
				return keyStrong
			}
		case 'W':
			if hasPrefixFold(rest, "WEBHOOK") {
				return keyStrong
			}
		case 'B':
			if hasPrefixFold(rest, "BEARER") {
				return keyStrong
			}
		}
	}
	return found
}

// strongCompound reports whether before ends with one of the upper-case
// suffixes, ignoring ASCII case.
func strongCompound(before string, suffixes ...string) bool {
	for _, suf := range suffixes {
		if len(before) >= len(suf) && equalFoldUpper(before[len(before)-len(suf):], suf) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, upper string) bool {
	return len(s) >= len(upper) && equalFoldUpper(s[:len(upper)], upper)
}

func hasLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'a' && s[i] <= 'z' {
			return true
		}
	}
	return false
}

func upperASCII(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

func equalFoldUpper(s, upper string) bool {
	for i := 0; i < len(s); i++ {
		if upperASCII(s[i]) != upper[i] {
			return false
		}
	}
	return true
}

// hasSecretWord reports whether a '_', '-' or '.' separated word of name
// is a secret word.
func hasSecretWord(name string) bool {
	for start := 0; start <= len(name); {
		end := start
		for end < len(name) && name[end] != '_' && name[end] != '-' && name[end] != '.' {
			end++
		}
		if w := name[start:end]; len(w) >= 3 && len(w) <= 13 {
			for _, sw := range secretWordList {
				if len(sw) == len(w) && equalFoldUpper(w, sw) {
					return true
				}
			}
		}
		start = end + 1
	}
	return false
}

// shouldMaskValue is the shared gate of the key/value passes, for a name
// keyIsSecret judged secret with the given strength.
func shouldMaskValue(name string, strong bool, value string) bool {
	if value == "" || isMask(value) || isReference(value) {
		return false
	}
	if isPlainPath(value) && !isPasswordKey(name) {
		return false // SSH_AUTH_SOCK=/run/user/0/ssh.sock is configuration
	}
	return strong || looksOpaque(value)
}

// isReference: the value names a variable or lookup, not a secret
// (KEY=os.getenv('X'), TOKEN=$GITHUB_TOKEN, "${API_KEY}").
func isReference(v string) bool {
	for _, p := range [...]string{"os.getenv", "os.environ", "process.env", "$ENV{", "$("} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	if strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}") && !strings.ContainsAny(v[2:len(v)-1], "{}") {
		return true
	}
	if len(v) > 1 && v[0] == '$' {
		for i := 1; i < len(v); i++ {
			if !is(v[i], clNameChar) {
				return false
			}
		}
		return true
	}
	return false
}

func isPasswordKey(name string) bool {
	u := strings.ToUpper(name)
	return strings.Contains(u, "PASS") || strings.Contains(u, "PW")
}

// isPlainPath: an absolute or home path none of whose segments looks like
// an opaque credential (16+ characters mixing cases and digits).
func isPlainPath(v string) bool {
	if !(strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~/")) {
		return false
	}
	for _, seg := range strings.Split(v, "/") {
		if len(seg) >= 16 && !strings.Contains(seg, ".") && classCount(seg) == 3 {
			return false
		}
	}
	return true
}

// looksOpaque is the reference's credential-shape test for values of
// ambiguous keys.
func looksOpaque(v string) bool {
	if len(v) >= 16 && allIn(v, "0123456789abcdefABCDEF") {
		return true
	}
	if len(v) >= 20 && allIn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+=-") {
		return true
	}
	return len(v) >= 12 && classCount(v) >= 2
}

func allIn(v, set string) bool {
	for i := 0; i < len(v); i++ {
		if strings.IndexByte(set, v[i]) < 0 {
			return false
		}
	}
	return true
}

// classCount counts which of lowercase, uppercase, digit v holds.
func classCount(v string) int {
	var lo, up, dg int
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'a' && c <= 'z':
			lo = 1
		case c >= 'A' && c <= 'Z':
			up = 1
		case c >= '0' && c <= '9':
			dg = 1
		}
	}
	return lo + up + dg
}
