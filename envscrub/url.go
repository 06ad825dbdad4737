package envscrub

import "strings"

// dsnSchemes are the database schemes whose user:password@ is masked. The
// reference lists postgres(ql), mysql, mongodb(+srv), redis and amqp;
// kernpool also knows their TLS and driver-suffixed forms
// (rediss://, amqps://, postgresql+psycopg://), which it otherwise leaks.
var dsnSchemes = map[string]bool{
	"postgres": true, "postgresql": true, "mysql": true, "mariadb": true, "mongodb": true,
	"redis": true, "rediss": true, "amqp": true, "amqps": true, "mssql": true,
	"cockroachdb": true, "clickhouse": true,
}

// bareTokenSchemes are the web schemes whose scheme://TOKEN@host userinfo
// (no colon) is masked; user:pass@ on them passes through, as in the
// reference (OAuth callbacks, magic links).
var bareTokenSchemes = [...]string{"https", "http", "wss", "ws", "sftp", "ftps", "ftp", "git", "ssh"}

// urlMatch handles the "://" at i.
func urlMatch(sc *scanCache, i, floor int) (edit, int, bool) {
	s := sc.s
	k := i
	for k > floor && is(s[k-1], clSchemeChr) {
		k--
	}
	scheme := strings.ToLower(s[k:i])
	if isDSNScheme(scheme) {
		return dsnPassword(sc, i)
	}
	for _, b := range bareTokenSchemes {
		if strings.HasSuffix(scheme, b) {
			return bareToken(s, i)
		}
	}
	return edit{}, 0, false
}

// isDSNScheme matches the reference's schemes as a suffix of the scheme
// run (it has no left boundary) and kernpool's base-before-'+' forms.
func isDSNScheme(scheme string) bool {
	for _, b := range [...]string{"postgres", "postgresql", "mysql", "mongodb", "mongodb+srv", "redis", "amqp"} {
		if strings.HasSuffix(scheme, b) {
			return true
		}
	}
	base, _, _ := strings.Cut(scheme, "+")
	return dsnSchemes[base]
}

// dsnPassword: scheme://[^:\s]*:([^@\s]+)@ -> password masked as ***. An
// empty user is allowed (redis://:password@host, which the reference
// leaks); a {...} password is an f-string template, not a credential.
func dsnPassword(sc *scanCache, i int) (edit, int, bool) {
	s := sc.s
	j := i + 3
	u := j
	for u < len(s) && s[u] != ':' && !is(s[u], clSpace) {
		u++
	}
	if u >= len(s) || s[u] != ':' {
		return edit{}, 0, false
	}
	ps := u + 1
	pe := min(sc.nextAt(ps), sc.nextSpace(ps))
	if pe == ps || pe >= len(s) || s[pe] != '@' {
		return edit{}, 0, false
	}
	pw := s[ps:pe]
	if pw == "***" || (strings.HasPrefix(pw, "{") && strings.HasSuffix(pw, "}")) {
		return edit{}, pe + 1, true
	}
	return edit{ps, pe, "***"}, pe + 1, true
}

// bareToken: scheme://([^\s:@/]{8,})@\S -> token masked.
func bareToken(s string, i int) (edit, int, bool) {
	j := i + 3
	t := j
	for t < len(s) && s[t] != ':' && s[t] != '@' && s[t] != '/' && !is(s[t], clSpace) {
		t++
	}
	if t-j < 8 || t+1 >= len(s) || s[t] != '@' || is(s[t+1], clSpace) {
		return edit{}, 0, false
	}
	return maskEdit(s, j, t), t + 1, true
}
