package envscrub

import "strings"

// Which keys of NAME=value assignments and quoted "NAME": "value" pairs
// hold secrets. An environment-style name (no lowercase letter) is secret
// by parity §1 rule 2, so a `.env` dump or `env` listing is masked, also on
// code output (the reference skips it there: its open bug). A name with
// lowercase letters counts only when one of its '_'/'-'/'.' separated words
// is a secret word, so prose and code words that merely contain one
// (monkey, author, keyboard, tokenizer) stay untouched.

// secretWords are the rule-2 words as whole lowercase components.
var secretWords = map[string]bool{
	"key": true, "token": true, "secret": true, "password": true, "credential": true,
	"credentials": true, "passwd": true, "auth": true, "dsn": true, "webhook": true,
	"creds": true, "bearer": true, "apikey": true, "authorization": true,
}

// strongMarks make any value of the key secret. KEY and TOKEN alone are
// ambiguous (MAX_TOKENS=100, SORT_KEY=name): such a key's value must also
// look like a credential.
var strongMarks = [...]string{
	"SECRET", "PASSWORD", "CREDENTIAL", "PASSWD", "AUTH", "DSN", "WEBHOOK", "CREDS",
	"BEARER", "APIKEY", "API_KEY", "API-KEY", "ACCESS_KEY", "PRIVATE_KEY",
	"ACCESS_TOKEN", "REFRESH_TOKEN", "SESSION_TOKEN", "ID_TOKEN",
}

// keyIsSecret reports whether name holds a secret and whether any value of
// it is secret (strong) or only an opaque-looking one.
func keyIsSecret(name string) (secret, strong bool) {
	upper := strings.ToUpper(name)
	if upper == name {
		if secretSubstring(upper) == "" {
			return false, false
		}
	} else if !hasSecretWord(name) {
		return false, false
	}
	for _, m := range strongMarks {
		if strings.Contains(upper, m) {
			return true, true
		}
	}
	return true, false
}

func hasSecretWord(name string) bool {
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if secretWords[strings.ToLower(w)] {
			return true
		}
	}
	return false
}

// shouldMaskValue is the shared gate of the key/value passes.
func shouldMaskValue(name, value string) bool {
	if value == "" || isMask(value) || isReference(value) {
		return false
	}
	secret, strong := keyIsSecret(name)
	if !secret {
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
