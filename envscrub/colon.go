package envscrub

import "strings"

// redactColon runs every pattern anchored on a ':' in one left-to-right
// scan: URL credentials (scheme://), Authorization headers, API-key
// headers, quoted secret keys ("API_KEY": "v", 'password': 'v') and
// Telegram bot tokens. Each match consumes its span, and look-backs never
// reach into a consumed span, as re.sub's non-overlapping matches.
func redactColon(s string) string { return redactColonRW(nil, s) }

func redactColonRW(rw *rewriter, s string) string {
	if strings.IndexByte(s, ':') < 0 {
		return s
	}
	var edits []edit
	floor := 0
	sc := &scanCache{s: s}
	for pos := 0; ; {
		k := strings.IndexByte(s[pos:], ':')
		if k < 0 {
			break
		}
		i := pos + k
		pos = i + 1
		e, end, ok := colonMatch(sc, i, floor)
		if !ok {
			continue
		}
		if e.end > e.start {
			edits = append(edits, e)
		}
		pos, floor = end, end
	}
	return rw.apply(s, edits)
}

// colonMatch tries the colon patterns at the ':' at i. ok reports a match
// (consumed up to end); e is the edit, empty when the value is kept.
func colonMatch(sc *scanCache, i, floor int) (e edit, end int, ok bool) {
	s := sc.s
	if strings.HasPrefix(s[i+1:], "//") {
		return urlMatch(sc, i, floor)
	}
	if i-13 >= floor && equalFoldASCII(s[i-13:i], "authorization") {
		return authHeader(s, i)
	}
	if e, end, ok = secretHeader(s, i, floor); ok {
		return e, end, ok
	}
	if e, end, ok = quotedKey(s, i, floor); ok {
		return e, end, ok
	}
	return telegram(s, i, floor)
}

// maskEdit masks s[vs:ve] unless it is already a mask.
func maskEdit(s string, vs, ve int) edit {
	if isMask(s[vs:ve]) {
		return edit{}
	}
	return edit{vs, ve, maskToken(s[vs:ve])}
}

// authHeader: (Proxy-)Authorization:\s*([A-Za-z][\w.+-]*\s+)?([^\s"']+),
// scheme word kept, credential masked.
func authHeader(s string, i int) (edit, int, bool) {
	j := skipSpace(s, i+1)
	if j < len(s) && isLetter(s[j]) {
		w := j + 1
		for w < len(s) && (is(s[w], clNameChar) || s[w] == '.' || s[w] == '+' || s[w] == '-') {
			w++
		}
		if sp := skipSpace(s, w); sp > w && credEnd(s, sp) > sp {
			j = sp
		}
	}
	end := credEnd(s, j)
	if end == j {
		return edit{}, 0, false
	}
	return maskEdit(s, j, end), end, true
}

// credEnd ends a [^\s"']+ run.
func credEnd(s string, j int) int {
	for j < len(s) && !is(s[j], clSpace) && s[j] != '"' && s[j] != '\'' {
		j++
	}
	return j
}

// secretHeaderNames are API-key style headers with one opaque value.
var secretHeaderNames = [...]string{
	"x-api-key", "x-goog-api-key", "api-key", "apikey", "x-api-token", "x-auth-token", "x-access-token",
}

// secretHeader: (name)\s*:\s*(\S+), the name matched case-insensitively
// and unanchored on the left, as in the reference.
func secretHeader(s string, i, floor int) (edit, int, bool) {
	j := i
	for j > floor && is(s[j-1], clSpace) {
		j--
	}
	if j == floor || (s[j-1]|0x20 != 'y' && s[j-1]|0x20 != 'n') {
		return edit{}, 0, false // every header name ends in "key" or "token"
	}
	before := s[floor:j]
	for _, n := range secretHeaderNames {
		if foldSuffix(before, n) {
			vs := skipSpace(s, i+1)
			ve := nonSpaceEnd(s, vs)
			if ve == vs {
				return edit{}, 0, false
			}
			return maskEdit(s, vs, ve), ve, true
		}
	}
	return edit{}, 0, false
}

// quotedKey masks "NAME": "value" and 'NAME': 'value' (JSON and Python
// dict dumps) when NAME holds a secret by keyIsSecret or is a secret header
// (Authorization keeps its scheme word).
func quotedKey(s string, i, floor int) (edit, int, bool) {
	j := i
	for j > floor && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j-2 < floor || (s[j-1] != '"' && s[j-1] != '\'') {
		return edit{}, 0, false
	}
	q := s[j-1]
	k := j - 1
	for k > floor && (is(s[k-1], clNameChar) || s[k-1] == '-' || s[k-1] == '.') {
		k--
	}
	if k == j-1 || k-1 < floor || s[k-1] != q {
		return edit{}, 0, false
	}
	name := s[k : j-1]
	if len(name) > 64 {
		return edit{}, 0, false
	}
	vs := i + 1
	for vs < len(s) && (s[vs] == ' ' || s[vs] == '\t') {
		vs++
	}
	if vs+1 < len(s) && (s[vs] == 'b' || s[vs] == 'B') && (s[vs+1] == '\'' || s[vs+1] == '"') {
		vs++ // Python bytes repr
	}
	if vs >= len(s) || (s[vs] != '"' && s[vs] != '\'') {
		return edit{}, 0, false
	}
	vq := s[vs]
	vs++
	ve := vs
	for ve < len(s) && s[ve] != vq && s[ve] != '\n' {
		ve++
	}
	if ve >= len(s) || s[ve] != vq || ve == vs {
		return edit{}, 0, false
	}
	if equalFoldASCII(name, "authorization") || equalFoldASCII(name, "proxy-authorization") {
		if sp := strings.IndexByte(s[vs:ve], ' '); sp > 0 {
			vs += sp + 1
		}
		return maskEdit(s, vs, ve), ve + 1, true
	}
	if isSecretHeaderName(name) {
		return maskEdit(s, vs, ve), ve + 1, true
	}
	secret, strong := keyIsSecret(name)
	if !secret {
		return edit{}, 0, false
	}
	if shouldMaskValue(name, strong, s[vs:ve]) {
		return maskEdit(s, vs, ve), ve + 1, true
	}
	return edit{}, ve + 1, true
}

func isSecretHeaderName(name string) bool {
	for _, n := range secretHeaderNames {
		if equalFoldASCII(name, n) {
			return true
		}
	}
	return false
}

// telegram: (?<!\d)(bot)?(\d{8,}):([-A-Za-z0-9_]{30,}) -> \1\2:***.
func telegram(s string, i, floor int) (edit, int, bool) {
	d := i
	for d > floor && is(s[d-1], clDigit) {
		d--
	}
	if i-d < 8 || (d > 0 && is(s[d-1], clDigit)) {
		return edit{}, 0, false // the look-behind sees consumed text too
	}
	end := runOf(s, i+1, clTelegram)
	if end-(i+1) < 30 {
		return edit{}, 0, false
	}
	return edit{i + 1, end, "***"}, end, true
}

// scanCache remembers the next '@' and the next whitespace found from a
// position: the DSN password scan runs to one of them from every
// "postgres://u:", and without the cache a line of such prefixes with no
// '@' would be scanned once per prefix (quadratic).
type scanCache struct {
	s                string
	atPos, atFrom    int
	spPos, spFrom    int
	atValid, spValid bool
}

// nextAt returns the first '@' at or after j, or len(s).
func (c *scanCache) nextAt(j int) int {
	if c.atValid && j >= c.atFrom && j <= c.atPos {
		return c.atPos
	}
	k := strings.IndexByte(c.s[j:], '@')
	c.atFrom, c.atValid = j, true
	if k < 0 {
		c.atPos = len(c.s)
	} else {
		c.atPos = j + k
	}
	return c.atPos
}

// nextSpace returns the first ASCII whitespace at or after j, or len(s).
func (c *scanCache) nextSpace(j int) int {
	if c.spValid && j >= c.spFrom && j <= c.spPos {
		return c.spPos
	}
	k := j
	for k < len(c.s) && !is(c.s[k], clSpace) {
		k++
	}
	c.spFrom, c.spPos, c.spValid = j, k, true
	return k
}
