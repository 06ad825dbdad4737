package envscrub

import "strings"

// redactAssignments masks the value of NAME=value (spaces around '=' and a
// quoted value allowed) when NAME holds a secret (keys.go). Values stop at
// whitespace; a quoted value stops at its last closing quote in that run,
// as the reference's backreference does. Comparisons (==) are skipped.
func redactAssignments(s string) string { return redactAssignmentsRW(nil, s) }

func redactAssignmentsRW(rw *rewriter, s string) string {
	if strings.IndexByte(s, '=') < 0 {
		return s
	}
	var edits []edit
	floor := 0
	for pos := 0; ; {
		k := strings.IndexByte(s[pos:], '=')
		if k < 0 {
			break
		}
		i := pos + k
		pos = i + 1
		if i+1 < len(s) && s[i+1] == '=' {
			pos = i + 2
			continue
		}
		name := nameBefore(s, i, floor)
		if name == "" {
			continue
		}
		secret, strong := keyIsSecret(name)
		if !secret {
			continue
		}
		vs, ve, consumed := assignedValue(s, i+1)
		if ve <= vs {
			continue
		}
		if shouldMaskValue(name, strong, s[vs:ve]) {
			edits = append(edits, edit{vs, ve, maskToken(s[vs:ve])})
		}
		// A secret key's value is consumed even when left unmasked, as
		// re.sub consumes a match whose callback keeps it.
		pos, floor = consumed, consumed
	}
	return rw.apply(s, edits)
}

// nameBefore returns the [A-Za-z0-9_] run ending at i (spaces/tabs before
// '=' skipped), not reaching below floor. A lowercase name that is a URL
// query parameter (after '?' or '&') is not an assignment: web URLs pass
// through, as in the reference.
func nameBefore(s string, i, floor int) string {
	j := i
	for j > floor && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	k := j
	for k > floor && is(s[k-1], clNameChar) {
		k--
	}
	name := s[k:j]
	if name == "" {
		return ""
	}
	if k > 0 && (s[k-1] == '?' || s[k-1] == '&') && hasLower(name) {
		return ""
	}
	return name
}

// assignedValue parses the value after '=' at j: [ \t]* then an optional
// quote q and \S+ closed by the last q of the run. It returns the value
// span and where the match ends.
func assignedValue(s string, j int) (vs, ve, consumed int) {
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j >= len(s) {
		return j, j, j
	}
	if q := s[j]; q == '\'' || q == '"' {
		run := nonSpaceEnd(s, j+1)
		if last := strings.LastIndexByte(s[j+1:run], q); last >= 1 {
			return j + 1, j + 1 + last, j + 2 + last
		}
		return j, run, run
	}
	end := nonSpaceEnd(s, j)
	return j, end, end
}
