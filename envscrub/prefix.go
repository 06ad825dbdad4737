package envscrub

import (
	"iter"
	"slices"
	"strings"
)

// Provider token prefixes (parity §2), in the reference's order: at one
// position the first rule that matches wins. A token matches only when not
// glued to other word characters: the byte before the prefix is not in
// [A-Za-z0-9_-] (or it follows a \n-style, \uXXXX or \xHH escape, as in
// JSON-escaped text), and the byte after the body is not in [A-Za-z0-9_-].

type bodyKind uint8

const (
	bodyRun    bodyKind = iota // prefix + class{min,}
	bodyExact                  // prefix + class{min} exactly (AKIA)
	bodyDotted                 // sk-: word chars with single dots between
	bodyXapp                   // xapp-: digits '-' class{min,}
)

type tokenRule struct {
	prefix string
	class  uint16
	min    int
	kind   bodyKind
}

// Body classes composed from the shared table.
const (
	clsAlnumU     = clNameChar       // [A-Za-z0-9_]
	clsAlnumUD    = clWord           // [A-Za-z0-9_-]
	clsAlnumD     = clAlnum | clDash // [A-Za-z0-9-]
	clsAlnumUDDot = clWord | clDot   // [A-Za-z0-9_.-]
)

var tokenRules = []tokenRule{
	{"sk-", clsAlnumUD, 10, bodyDotted},
	{"ghp_", clAlnum, 10, bodyRun},
	{"github_pat_", clsAlnumU, 10, bodyRun},
	{"gho_", clAlnum, 10, bodyRun},
	{"ghu_", clAlnum, 10, bodyRun},
	{"ghs_", clAlnum, 10, bodyRun},
	{"ghr_", clAlnum, 10, bodyRun},
	{"xapp-", clsAlnumD, 10, bodyXapp},
	{"xoxb-", clsAlnumD, 10, bodyRun},
	{"xoxa-", clsAlnumD, 10, bodyRun},
	{"xoxp-", clsAlnumD, 10, bodyRun},
	{"xoxr-", clsAlnumD, 10, bodyRun},
	{"xoxs-", clsAlnumD, 10, bodyRun},
	{"AIza", clsAlnumUD, 30, bodyRun},
	{"pplx-", clAlnum, 10, bodyRun},
	{"fal_", clsAlnumUD, 10, bodyRun},
	{"fc-", clAlnum, 10, bodyRun},
	{"bb_live_", clsAlnumUD, 10, bodyRun},
	{"gAAAA", clFernet, 20, bodyRun},
	{"AKIA", clUpperDig, 16, bodyExact},
	{"sk_live_", clAlnum, 10, bodyRun},
	{"sk_test_", clAlnum, 10, bodyRun},
	{"rk_live_", clAlnum, 10, bodyRun},
	{"SG.", clsAlnumUD, 10, bodyRun},
	{"hf_", clAlnum, 10, bodyRun},
	{"r8_", clAlnum, 10, bodyRun},
	{"npm_", clAlnum, 10, bodyRun},
	{"pypi-", clsAlnumUD, 10, bodyRun},
	{"dop_v1_", clAlnum, 10, bodyRun},
	{"doo_v1_", clAlnum, 10, bodyRun},
	{"am_org_", clAlnum, 20, bodyRun},
	{"am_", clAlnum, 20, bodyRun},
	{"sk_", clsAlnumU, 10, bodyRun},
	{"tvly-", clAlnum, 10, bodyRun},
	{"exa_", clAlnum, 10, bodyRun},
	{"gsk_", clAlnum, 10, bodyRun},
	{"syt_", clAlnum, 10, bodyRun},
	{"retaindb_", clAlnum, 10, bodyRun},
	{"hsk-", clAlnum, 10, bodyRun},
	{"mem0_", clAlnum, 10, bodyRun},
	{"brv_", clAlnum, 10, bodyRun},
	{"xai-", clAlnum, 30, bodyRun},
	{"ntn_", clAlnum, 10, bodyRun},
	{"fw-", clAlnum, 30, bodyRun},
	{"fw_", clAlnum, 30, bodyRun},
	{"fpk_", clAlnum, 30, bodyRun},
	{"glpat-", clsAlnumUD, 10, bodyRun},
	{"gloas-", clsAlnumUD, 10, bodyRun},
	{"gldt-", clsAlnumUD, 10, bodyRun},
	{"glrt-", clsAlnumUDDot, 10, bodyRun},
	{"glrtr-", clsAlnumUDDot, 10, bodyRun},
	{"glcbt-", clsAlnumUD, 10, bodyRun},
	{"glptt-", clsAlnumUD, 10, bodyRun},
	{"glft-", clsAlnumUD, 10, bodyRun},
	{"glimt-", clsAlnumUD, 10, bodyRun},
	{"glagent-", clsAlnumUD, 10, bodyRun},
	{"glsoat-", clsAlnumUD, 10, bodyRun},
	{"glffct-", clsAlnumUD, 10, bodyRun},
	{"glwt-", clsAlnumUD, 10, bodyRun},
	{"GR1348941", clsAlnumUD, 10, bodyRun},
	{"pk-lf-", clsAlnumD, 8, bodyRun},
}

// rulesByFirst indexes tokenRules by their first byte, keeping order.
var rulesByFirst = func() (t [256][]int) {
	for i, r := range tokenRules {
		t[r.prefix[0]] = append(t[r.prefix[0]], i)
	}
	return t
}()

// prefixPairs[c0] is the set of second bytes c1 such that c0 c1 starts a
// token prefix: one bit test rejects almost every word start.
var prefixPairs = func() (t [256][4]uint64) {
	for _, r := range tokenRules {
		c1 := r.prefix[1]
		t[r.prefix[0]][c1>>6] |= 1 << (c1 & 63)
	}
	return t
}()

// tokenEnd returns the end of a token of rule r starting at i, or -1.
func (r *tokenRule) tokenEnd(s string, i int) int {
	j := i + len(r.prefix)
	if j > len(s) || s[i+1] != r.prefix[1] || s[i:j] != r.prefix {
		return -1
	}
	var end int
	switch r.kind {
	case bodyRun:
		end = runOf(s, j, r.class)
		if end-j < r.min {
			return -1
		}
	case bodyExact:
		end = runOf(s, j, r.class)
		if end-j != r.min {
			return -1
		}
	case bodyDotted:
		end = dottedEnd(s, j, r.class, r.min)
		if end < 0 {
			return -1
		}
	case bodyXapp:
		d := runOf(s, j, clDigit)
		if d == j || d >= len(s) || s[d] != '-' {
			return -1
		}
		end = runOf(s, d+1, r.class)
		if end-(d+1) < r.min {
			return -1
		}
	}
	if end < len(s) && is(s[end], clWord) {
		return -1
	}
	return end
}

// dottedEnd parses cls(?:\.?cls){min-1,} (a body that never ends on a dot
// and never holds "..").
func dottedEnd(s string, j int, cls uint16, min int) int {
	if j >= len(s) || !is(s[j], cls) {
		return -1
	}
	units, k := 1, j+1
	for k < len(s) {
		switch {
		case is(s[k], cls):
			k++
		case s[k] == '.' && k+1 < len(s) && is(s[k+1], cls):
			k += 2
		default:
			goto done
		}
		units++
	}
done:
	if units < min {
		return -1
	}
	return k
}

// tokenStart reports whether a token may start at i: not glued to a word
// character before it, except right after a \n-style, \uXXXX or \xHH
// escape (JSON-escaped text glues credentials to the escape's letter).
func tokenStart(s string, i int) bool {
	if i == 0 || !is(s[i-1], clWord) {
		return true
	}
	if i >= 2 && s[i-2] == '\\' && isLetter(s[i-1]) {
		return true
	}
	if i >= 6 && s[i-6] == '\\' && s[i-5] == 'u' && isHex(s[i-4:i]) {
		return true
	}
	return i >= 4 && s[i-4] == '\\' && s[i-3] == 'x' && isHex(s[i-2:i])
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// redactPrefixTokens masks every provider token and Zhipu key in s.
//
// A per-byte scan costs more than the rest of the pipeline, so candidate
// starts come from SIMD byte searches instead: every prefix but four holds
// '-', '_' or '.' within its first 9 bytes after an alphanumeric run, so
// each such separator yields at most one candidate (the start of the run
// before it); AIza, AKIA, gAAAA and GR1348941 are found by literal search;
// a Zhipu key by the '.' after its 32 hex digits. Candidates are then
// matched in text order exactly as a left-to-right scan would
// (prefix_ref_test.go cross-checks it against that scan).
func redactPrefixTokens(s string) string { return redactPrefixTokensRW(nil, s) }

func redactPrefixTokensRW(rw *rewriter, s string) string {
	starts := tokenCandidates(s)
	if len(starts) == 0 {
		return s
	}
	var edits []edit
	next := 0
	for _, i := range starts {
		if i < next || !tokenStart(s, i) {
			continue
		}
		end := -1
		if i+1 < len(s) && prefixPairs[s[i]][s[i+1]>>6]&(1<<(s[i+1]&63)) != 0 {
			for _, k := range rulesByFirst[s[i]] {
				if end = tokenRules[k].tokenEnd(s, i); end >= 0 {
					break
				}
			}
		}
		if end < 0 && is(s[i], clLowerHex) && i+32 < len(s) && s[i+32] == '.' {
			end = zhipuEnd(s, i)
		}
		if end < 0 {
			continue
		}
		edits = append(edits, edit{i, end, maskToken(s[i:end])})
		next = end
	}
	return rw.apply(s, edits)
}

// maxPrefixHead is the longest alphanumeric run before a prefix's first
// separator ("retaindb").
const maxPrefixHead = 8

// tokenCandidates returns the sorted, distinct positions where a token may
// start.
func tokenCandidates(s string) []int {
	var starts []int
	for _, sep := range [...]byte{'-', '_'} {
		for p := range indexes(s, string(sep)) {
			h := p
			for h > 0 && p-h <= maxPrefixHead && is(s[h-1], clAlnum) {
				h--
			}
			if p-h > maxPrefixHead {
				h = p - maxPrefixHead // a start after an escape (\nghp_) sits inside the run
			}
			for c := h; c+2 <= p; c++ {
				if prefixPairs[s[c]][s[c+1]>>6]&(1<<(s[c+1]&63)) != 0 {
					starts = append(starts, c)
				}
			}
		}
	}
	// '.' ends the head of "SG." only; searching "SG." and sampling hex runs
	// for Zhipu keys beats visiting every '.' of prose.
	starts = slices.AppendSeq(starts, indexes(s, "SG."))
	starts = zhipuCandidates(s, starts)
	// The prefixes without a separator: AIza, AKIA, gAAAA (one search for
	// 'A') and GR1348941.
	for p := range indexes(s, "A") {
		rest := s[p:]
		switch {
		case strings.HasPrefix(rest, "AIza"), strings.HasPrefix(rest, "AKIA"):
			starts = append(starts, p)
		case p > 0 && s[p-1] == 'g' && strings.HasPrefix(rest, "AAAA"):
			starts = append(starts, p-1)
		}
	}
	starts = slices.AppendSeq(starts, indexes(s, "GR1348941"))
	if len(starts) > 1 {
		slices.Sort(starts)
		starts = slices.Compact(starts)
	}
	return starts
}

// zhipuCandidates appends the start of every 32-digit lowercase hex run
// that ends in '.'. Such a run holds a position p ≡ 0 (mod 16), so only
// every 16th byte is tested; a hex sample is followed to its run's end,
// and sampling resumes after it (linear even on a hex blob).
func zhipuCandidates(s string, starts []int) []int {
	for p := 0; p < len(s); p += 16 {
		if !is(s[p], clLowerHex) {
			continue
		}
		e := runOf(s, p, clLowerHex)
		if e < len(s) && s[e] == '.' && hexRunBack(s, e) >= 32 {
			starts = append(starts, e-32)
		}
		p = e / 16 * 16 // the next sample is the first one past e
	}
	return starts
}

// hexRunBack returns the length of the [0-9a-f] run ending at p (at most 33).
func hexRunBack(s string, p int) int {
	n := 0
	for p-n > 0 && n < 33 && is(s[p-n-1], clLowerHex) {
		n++
	}
	return n
}

// zhipuEnd matches the unprefixed Zhipu key [0-9a-f]{32}\.[A-Za-z0-9]{16,}
// bounded by [A-Za-z0-9_.-] on both sides.
func zhipuEnd(s string, i int) int {
	if i > 0 && (is(s[i-1], clWord) || s[i-1] == '.') {
		return -1
	}
	if runOf(s, i, clLowerHex)-i < 32 {
		return -1
	}
	end := runOf(s, i+33, clAlnum)
	if end-(i+33) < 16 {
		return -1
	}
	if end < len(s) && (is(s[end], clWord) || s[end] == '.') {
		return -1
	}
	return end
}

// indexes yields the index of every occurrence of sub in s, left to right,
// overlapping ones included.
func indexes(s, sub string) iter.Seq[int] {
	return func(yield func(int) bool) {
		for pos := 0; ; {
			k := strings.Index(s[pos:], sub)
			if k < 0 || !yield(pos+k) {
				return
			}
			pos += k + 1
		}
	}
}
