package envscrub

import (
	"cmp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/kernpool/kernpool/pool"
)

// The pool's seams this package fills, with the pool's own types.
var (
	_ pool.EnvBuilder          = (*Scrubber)(nil)
	_ pool.EnvChecker          = (*Scrubber)(nil)
	_ pool.OutputFilterFactory = (*Pipeline)(nil)
	_ pool.RedactionCounter    = (*Filter)(nil)
)

// Output caps of parity §2.
const (
	DefaultInlineCap = 50_000
	DefaultStderrCap = 10_000
	DefaultSpillCap  = 5_000_000
	// spillQuotaFactor: a kernel's spill files may hold this many spills
	// at the cap together (SpillQuota's default).
	spillQuotaFactor = 4
	// ResultTextBudget bounds the text of one cell's result: inline stdout
	// plus three texts capped like stderr (stderr, traceback, error), so
	// InlineCap + 3 x StderrCap must stay within it (about 1 MiB with the
	// notices and the fixed fields).
	ResultTextBudget = 1_000_000
)

// OutputConfig configures the output pipeline. Zero values mean the
// defaults, so the zero OutputConfig is the reference's behaviour.
type OutputConfig struct {
	// DisablePatternRedaction turns pattern redaction (token prefixes,
	// assignments, headers, keys, DSNs, JWTs) off. ANSI stripping and
	// exact-value masking of the kernel's known secrets stay on.
	DisablePatternRedaction bool
	// InlineCap caps the stdout returned inline, in bytes (default 50,000):
	// head 40 %, a truncation notice, tail 60 %.
	InlineCap int
	// StderrCap caps stderr the same way (default 10,000 bytes).
	StderrCap int
	// SpillCap caps the spill file holding the full stdout, its cap
	// notice included (default 5,000,000 bytes).
	SpillCap int
	// SpillQuota caps the bytes one kernel's spill files hold together
	// (default 4 x SpillCap); older spill files are removed first.
	SpillQuota int64
}

// Pipeline makes per-kernel output filters. It is immutable and safe for
// concurrent use.
type Pipeline struct {
	patterns                  bool
	inline, stderrCap, spillC int
	quota                     int64
	bufs                      sync.Pool // scratch buffers of Clean (rewriter)
}

// NewPipeline returns the output pipeline for cfg.
func NewPipeline(cfg OutputConfig) *Pipeline {
	p := &Pipeline{
		patterns:  !cfg.DisablePatternRedaction,
		inline:    cfg.InlineCap,
		stderrCap: cfg.StderrCap,
		spillC:    cfg.SpillCap,
		quota:     cfg.SpillQuota,
	}
	p.inline = cmp.Or(max(p.inline, 0), DefaultInlineCap)
	p.stderrCap = cmp.Or(max(p.stderrCap, 0), DefaultStderrCap)
	p.spillC = cmp.Or(max(p.spillC, 0), DefaultSpillCap)
	if p.quota <= 0 {
		p.quota = spillQuotaFactor * int64(p.spillC)
	}
	return p
}

// ForKernel is Filter as the pool's seam (pool.OutputFilterFactory).
func (p *Pipeline) ForKernel(secrets []string) pool.OutputFilter { return p.Filter(secrets) }

// Filter returns the filter of one kernel. secrets are the exact values
// (scrubbed environment values, the RPC token) always masked, even with
// pattern redaction off; values shorter than MinSecretLen are ignored.
// A secret holding a quote, backslash or control character is also masked
// in its JSON- and Python-escaped spellings (json.dumps, repr), since a
// cell printing a structure shows it that way.
func (p *Pipeline) Filter(secrets []string) *Filter {
	all := make([]string, 0, len(secrets))
	for _, v := range secrets {
		all = append(all, v)
		if strings.ContainsAny(v, "\\\"'\n\r\t") {
			all = append(all, escapeSecret(v, '"'), escapeSecret(v, '\''))
		}
	}
	return &Filter{p: p, exact: newExactSet(all)}
}

// escapeSecret spells v as inside a quote-delimited JSON or Python string.
func escapeSecret(v string, quote byte) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case quote:
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Filter cleans one kernel's output. Safe for concurrent use.
type Filter struct {
	p     *Pipeline
	exact *exactSet
	// redactions counts masks applied since the last TakeRedactions.
	redactions atomic.Int64
}

// TakeRedactions returns how many secrets Clean masked since the last
// call (metrics and the audit log count them per cell).
func (f *Filter) TakeRedactions() int { return int(f.redactions.Swap(0)) }

// Clean returns text as it may leave the daemon: invalid UTF-8 replaced by
// U+FFFD, ANSI stripped, known secrets masked, then (unless disabled) every
// redaction pattern applied in the reference's order. Clean is idempotent.
func (f *Filter) Clean(text string) string {
	if text == "" {
		return text
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	rw := &rewriter{pool: &f.p.bufs}
	defer func() {
		rw.release(text)
		f.redactions.Add(int64(rw.edits))
	}()
	text = stripANSI(rw, text)
	text = f.exact.maskRW(rw, text)
	if !f.p.patterns {
		return text
	}
	// Pattern masks insert "***", "..." and "[REDACTED PRIVATE KEY]"; when a
	// secret holds '*', '.' or '[' a mask could spell it again next to
	// other text, so the known secrets are masked once more and the
	// patterns rerun on what changed. Each round is a pass over the whole
	// text, so there are at most four; the last one still ends with the
	// re-mask: a crafted chain of DSNs whose masks spell the secret one
	// link per round must not get it out by outlasting the rounds.
	for round := 0; ; round++ {
		text = redactPatterns(rw, text)
		if f.exact == nil || !f.exact.recur {
			return text
		}
		again := f.exact.maskRW(rw, text)
		if again == text || round == 3 {
			return again
		}
		text = again
	}
}

// redactPatterns applies the pattern passes in the reference's order.
func redactPatterns(rw *rewriter, s string) string {
	s = redactPrefixTokensRW(rw, s)
	s = redactAssignmentsRW(rw, s)
	s = redactColonRW(rw, s)
	s = redactPEMRW(rw, s)
	s = redactJWTRW(rw, s)
	return s
}

// SpillCap is the cap of one spill file, in bytes.
func (p *Pipeline) SpillCap() int { return p.spillC }

// InlineCaps are the inline caps of stdout and stderr in bytes: a
// streamed cell sends at most these live (the spill keeps the rest).
func (f *Filter) InlineCaps() (stdout, stderr int) { return f.p.inline, f.p.stderrCap }
