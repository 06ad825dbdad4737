package envscrub

import (
	"sort"
	"strings"
)

// exactSet masks known secret values (scrubbed environment values, the RPC
// token) wherever they appear, with "***": a known secret gives away
// nothing, not even its head.
//
// Search is one sampled pass, independent of the number of secrets: with
// the shortest secret m bytes long (m >= MinSecretLen), any occurrence
// covers a text position p ≡ 0 (mod m-3) whose 4-byte gram lies inside
// it. The scan loads the gram at every (m-3)-th position, rejects it with a
// 64 Ki-bit filter, and verifies candidates from a gram index; API keys of
// 20+ bytes make that one load every 17 bytes.
type exactSet struct {
	secrets []string
	filter  *[1 << 10]uint64   // 1<<16 bits over gramHash
	index   map[uint32][]int32 // gram -> distinct secrets holding it
	recur   bool               // a secret holds '*', '.' or '[': a mask may spell it again
	step    int                // sampling step: shortest secret - gramLen + 1
}

// gramLen is the sampled gram's length (one 32-bit load).
const gramLen = 4

func newExactSet(values []string) *exactSet {
	seen := map[string]bool{}
	e := &exactSet{filter: new([1 << 10]uint64), index: map[uint32][]int32{}}
	for _, v := range values {
		if len(v) < MinSecretLen || seen[v] {
			continue
		}
		seen[v] = true
		e.secrets = append(e.secrets, v)
	}
	for si, v := range e.secrets {
		if e.step == 0 || len(v)-gramLen+1 < e.step {
			e.step = len(v) - gramLen + 1
		}
		if strings.ContainsAny(v, "*.[") { // the characters of "***", "...", "[REDACTED PRIVATE KEY]"
			e.recur = true
		}
		for off := 0; off+gramLen <= len(v); off++ {
			g := gramAt(v, off)
			h := gramHash(g)
			e.filter[h>>6] |= 1 << (h & 63)
			if l := e.index[g]; len(l) == 0 || l[len(l)-1] != int32(si) {
				e.index[g] = append(l, int32(si))
			}
		}
	}
	return e
}

func gramAt(s string, i int) uint32 {
	_ = s[i+3] // one bounds check; the four loads combine into one
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

// gramHash maps a gram to 16 bits (multiplicative hashing).
func gramHash(g uint32) uint32 { return (g * 0x9E3779B1) >> 16 }

// mask replaces every occurrence of every secret with "***". Overlapping
// occurrences are masked as their union. When a secret holds '*', '.' or
// '[', a mask next to other text could spell a secret again, so the pass repeats
// until nothing is found (each round shrinks the text: a secret of 8+
// bytes becomes 3).
func (e *exactSet) mask(s string) string { return e.maskRW(nil, s) }

func (e *exactSet) maskRW(rw *rewriter, s string) string {
	if e == nil || len(e.secrets) == 0 {
		return s
	}
	for {
		out := e.maskOnce(rw, s)
		if out == s || !e.recur {
			return out
		}
		s = out
	}
}

// maskOnce masks the occurrences present in s. A sampled gram that a
// secret holds means an occurrence of it may start in [p+4-len, p]; those
// starts are enumerated with strings.Index, and each start position is
// examined at most once per secret (next[]), so a secret whose grams are
// everywhere in the text (aaaaaaaa in aaaa...) stays linear per sample.
func (e *exactSet) maskOnce(rw *rewriter, s string) string {
	type span struct{ start, end int }
	var (
		spans []span
		next  []int // per secret: first start position not yet examined
	)
	filter, step := e.filter, e.step
	if step <= 0 {
		return s // no secrets
	}
	for p := 0; p+gramLen <= len(s); p += step {
		g := gramAt(s, p)
		h := gramHash(g)
		if filter[(h>>6)&(1<<10-1)]&(1<<(h&63)) == 0 {
			continue
		}
		for _, si := range e.index[g] {
			if next == nil {
				next = make([]int, len(e.secrets))
			}
			v := e.secrets[si]
			lo := max(p+gramLen-len(v), next[si], 0)
			for lo <= p {
				k := strings.Index(s[lo:min(len(s), p+len(v))], v)
				if k < 0 {
					break
				}
				spans = append(spans, span{lo + k, lo + k + len(v)})
				lo += k + 1
			}
			next[si] = p + 1
		}
	}
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	edits := make([]edit, 0, len(spans))
	for _, sp := range spans {
		if n := len(edits); n > 0 && sp.start <= edits[n-1].end {
			if sp.end > edits[n-1].end {
				edits[n-1].end = sp.end
			}
			continue
		}
		edits = append(edits, edit{sp.start, sp.end, "***"})
	}
	return rw.apply(s, edits)
}
