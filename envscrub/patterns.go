package envscrub

import "strings"

const pemMask = "[REDACTED PRIVATE KEY]"

// redactPEM replaces -----BEGIN[A-Z ]*PRIVATE KEY----- ... -----END[A-Z ]*PRIVATE KEY-----
// (shortest body) with [REDACTED PRIVATE KEY]. Beyond the reference, a
// block whose END line never comes (output clipped mid-key) is masked from
// its BEGIN line through the last line of its base64 body.
func redactPEM(s string) string { return redactPEMRW(nil, s) }

func redactPEMRW(rw *rewriter, s string) string {
	if !strings.Contains(s, "-----BEGIN") {
		return s
	}
	var edits []edit
	noEnd := false
	for pos := 0; ; {
		k := strings.Index(s[pos:], "-----BEGIN")
		if k < 0 {
			break
		}
		b := pos + k
		pos = b + 1
		hdrEnd, ok := pemLabel(s, b+len("-----BEGIN"))
		if !ok {
			continue
		}
		end := -1
		if !noEnd {
			end = pemEnd(s, hdrEnd)
			noEnd = end < 0
		}
		if end < 0 {
			end = base64BodyEnd(s, hdrEnd)
		}
		edits = append(edits, edit{b, end, pemMask})
		pos = end
	}
	return rw.apply(s, edits)
}

// pemLabel parses [A-Z ]*PRIVATE KEY----- at j and returns its end.
func pemLabel(s string, j int) (int, bool) {
	k := j
	for k < len(s) && (s[k] >= 'A' && s[k] <= 'Z' || s[k] == ' ') {
		k++
	}
	if !strings.HasSuffix(s[j:k], "PRIVATE KEY") || !strings.HasPrefix(s[k:], "-----") {
		return 0, false
	}
	return k + 5, true
}

// pemEnd finds the first valid END line after j and returns its end, or -1.
func pemEnd(s string, j int) int {
	for {
		k := strings.Index(s[j:], "-----END")
		if k < 0 {
			return -1
		}
		e := j + k
		if end, ok := pemLabel(s, e+len("-----END")); ok {
			return end
		}
		j = e + 1
	}
}

// base64BodyEnd returns the end of the lines after j made of base64 and
// PEM header characters (an unterminated key's body).
func base64BodyEnd(s string, j int) int {
	end := j
	for k := j; k < len(s); {
		nl := strings.IndexByte(s[k:], '\n')
		line := s[k:]
		if nl >= 0 {
			line = s[k : k+nl]
		}
		if k > j && strings.TrimSpace(line) == "" {
			break
		}
		if !allIn(strings.TrimRight(line, "\r"), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=:-, ") {
			break
		}
		end = k + len(line)
		if nl < 0 {
			break
		}
		k += nl + 1
	}
	return end
}

// redactJWT masks eyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_=-]{4,}){0,2}
// (no boundary, as in the reference).
func redactJWT(s string) string { return redactJWTRW(nil, s) }

func redactJWTRW(rw *rewriter, s string) string {
	var edits []edit
	// Search the rare 'J' and look back: "eyJ" via strings.Index stalls on
	// every 'e' of prose.
	for pos := 2; pos < len(s); {
		k := strings.IndexByte(s[pos:], 'J')
		if k < 0 {
			break
		}
		b := pos + k - 2
		pos += k + 1
		if s[b] != 'e' || s[b+1] != 'y' {
			continue
		}
		end := runOf(s, b+3, clWord)
		if end-(b+3) < 10 {
			continue
		}
		for seg := 0; seg < 2 && end < len(s) && s[end] == '.'; seg++ {
			e := runOf(s, end+1, clFernet)
			if e-(end+1) < 4 {
				break
			}
			end = e
		}
		edits = append(edits, edit{b, end, maskToken(s[b:end])})
		pos = end + 2
	}
	return rw.apply(s, edits)
}
