package envscrub

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Output is one cell's cleaned, capped output.
type Output struct {
	// Stdout is the cleaned stdout, truncated to the inline cap.
	Stdout string
	// Stderr is the cleaned stderr, truncated to the stderr cap.
	Stderr string
	// StdoutTruncated: Stdout lost its middle to the inline cap.
	StdoutTruncated bool
	// StdoutBytesTotal is the cleaned stdout's size before truncation.
	StdoutBytesTotal int
	// StderrTruncated: Stderr lost its middle to the stderr cap.
	StderrTruncated bool
	// StderrBytesTotal is the cleaned stderr's size before truncation.
	StderrBytesTotal int
	// SpillPath names the 0600 file holding the full (redacted) stdout.
	SpillPath string
	// Warning tells the reader where the full output went, or why it
	// could not be saved.
	Warning string
}

// Finish cleans stdout and stderr, caps both (head 40 %, notice, tail
// 60 %, cut on UTF-8 boundaries) and, when stdout was truncated, spills the
// full cleaned stdout to <spillDir>/SpillName(cell) (file 0640, created
// exclusively, never through a symlink, capped at the spill cap; the
// kernel's spill files are then trimmed to the spill quota, oldest first). Redaction happens before anything is written. A spill
// that cannot be written (no spillDir, full disk, planted file) leaves no
// partial file and says so in Warning; the inline result is still
// returned. The error is non-nil only for a negative cell, and even then
// the Output is complete (without a spill).
func (f *Filter) Finish(stdout, stderr, spillDir string, cell int) (Output, error) {
	out := f.Clean(stdout)
	errText := f.Clean(stderr)
	o := Output{StdoutBytesTotal: len(out), StderrBytesTotal: len(errText)}
	o.Stdout, o.StdoutTruncated = truncateMiddle(out, f.p.inline)
	o.Stderr, o.StderrTruncated = truncateMiddle(errText, f.p.stderrCap)
	if !o.StdoutTruncated {
		return o, nil
	}
	if cell < 0 {
		o.Warning = truncatedNoSpill("invalid cell number")
		return o, fmt.Errorf("finish: cell %d: %w", cell, ErrInvalidArgument)
	}
	if spillDir == "" {
		o.Warning = truncatedNoSpill("no spill directory")
		return o, nil
	}
	path, err := spill(spillDir, SpillName(cell), capSpill(out, f.p.spillC))
	if err != nil {
		o.Warning = truncatedNoSpill(err.Error())
		return o, nil
	}
	o.SpillPath = path
	o.Warning = "stdout was truncated (head/tail shown); the cell did run. FULL output (redacted) saved to " +
		path + " - read it there instead of re-running."
	if err := enforceQuota(spillDir, SpillName(cell), f.p.quota); err != nil {
		// The new spill stands; only older ones may now exceed the quota.
		o.Warning += " (Older spills could not be removed to keep the spill quota: " + err.Error() + ".)"
	}
	return o, nil
}

func truncatedNoSpill(reason string) string {
	return "stdout was truncated; the cell did run, but only the head/tail output is included " +
		"(the full output could not be saved: " + reason + "). Re-run with narrower output if the omitted data is required."
}

// truncateMiddle keeps the first 40 % and the last 60 % of limit bytes of
// s around the reference's notice, moving each cut to a rune boundary so
// no character is split (the omitted count is then exact, not limit-based).
func truncateMiddle(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	head := limit * 2 / 5
	tail := len(s) - (limit - head)
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + TruncationNotice(tail-head, len(s)) + s[tail:], true
}

// TruncationNotice is the reference's notice, numbers with thousands
// separators: "\n\n... [OUTPUT TRUNCATED - 950,000 bytes omitted out of
// 1,000,000 total] ...\n\n".
func TruncationNotice(omitted, total int) string {
	return "\n\n... [OUTPUT TRUNCATED - " + groupThousands(omitted) + " bytes omitted out of " +
		groupThousands(total) + " total] ...\n\n"
}

// capSpill cuts s (on a rune boundary) so that it and the reference's cap
// notice after it fit in limit bytes.
func capSpill(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	notice := "\n\n[... spill capped at " + groupThousands(limit) + " bytes ...]"
	cut := max(limit-len(notice), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + notice
}

// CapText cleans text (an error message, a traceback) and caps it like
// stderr: head 40 %, the reference's notice, tail 60 %.
func (f *Filter) CapText(text string) string {
	out, _ := truncateMiddle(f.Clean(text), f.p.stderrCap)
	return out
}

func groupThousands(n int) string {
	digits := strconv.Itoa(n)
	neg := ""
	if n < 0 {
		neg, digits = "-", digits[1:]
	}
	var out []byte
	for i := range len(digits) {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, digits[i])
	}
	return neg + string(out)
}
