package envscrub

import "strings"

// urlCredentials returns the credentials embedded in URL userinfo within
// value: the password of scheme://user:password@host, or the whole userinfo
// of scheme://token@host (Sentry DSNs, token-in-URL git remotes). A user
// name next to a password is not returned: "postgres" is not a secret, and
// masking it everywhere would ruin output.
func urlCredentials(value string) []string {
	var out []string
	for rest := value; ; {
		i := strings.Index(rest, "://")
		if i < 0 {
			return out
		}
		rest = rest[i+3:]
		end := strings.IndexAny(rest, "/?# \t\n")
		if end < 0 {
			end = len(rest)
		}
		authority := rest[:end]
		at := strings.LastIndexByte(authority, '@')
		if at <= 0 {
			continue
		}
		userinfo := authority[:at]
		if _, pw, ok := strings.Cut(userinfo, ":"); ok {
			if pw != "" {
				out = append(out, pw)
			}
			continue
		}
		out = append(out, userinfo)
	}
}
