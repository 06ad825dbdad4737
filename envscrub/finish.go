package envscrub

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kernpool/kernpool/pool"
)

// whole says whether the kernel kept all of c.
func whole(c pool.Clipped) bool { return c.Tail == "" && c.Total <= len(c.Head) }

// Finish is FinishClipped for two streams kept whole.
func (f *Filter) Finish(stdout, stderr, spillDir string, cell int) (pool.CellOutput, error) {
	return f.FinishClipped(pool.Clipped{Head: stdout}, pool.Clipped{Head: stderr}, spillDir, cell)
}

// FinishClipped cleans stdout and stderr, caps both (head 40 %, notice,
// tail 60 %, cut on UTF-8 boundaries; the tail is the stream's real end
// even when the kernel dropped its middle) and, when stdout was
// truncated, spills the cleaned stdout to <spillDir>/SpillName(cell)
// (file 0640, created exclusively, never through a symlink): all of it up
// to the spill cap, else its head, a notice and its end within the cap;
// the kernel's spill files are then trimmed to the spill quota, oldest
// first. Redaction happens before anything is written. A spill that
// cannot be written (no spillDir, full disk, planted file) leaves no
// partial file and says so in Warning; the inline result is still
// returned. The error is non-nil only for a negative cell, and even then
// the output is complete (without a spill).
func (f *Filter) FinishClipped(stdout, stderr pool.Clipped, spillDir string, cell int) (pool.CellOutput, error) {
	out, errText := f.cleanClipped(stdout), f.cleanClipped(stderr)
	o := pool.CellOutput{StdoutBytesTotal: out.Total, StderrBytesTotal: errText.Total}
	o.Stdout, o.StdoutTruncated = truncateClipped(out, f.p.inline)
	o.Stderr, o.StderrTruncated = truncateClipped(errText, f.p.stderrCap)
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
	if !whole(out) {
		o.Warning = "stdout was truncated (head/tail shown); the cell did run. Output (redacted) saved to " +
			path + " up to the spill cap of " + groupThousands(f.p.spillC) + " bytes, with its end - read it there instead of re-running."
	}
	if err := enforceQuota(spillDir, SpillName(cell), f.p.quota); err != nil {
		// The new spill stands; only older ones may now exceed the quota.
		o.Warning += " (Older spills could not be removed to keep the spill quota: " + err.Error() + ".)"
	}
	return o, nil
}

// cleanClipped cleans a stream's head and tail apart. A tail starts after
// its first newline: the kernel cut it at a byte count, which may split a
// secret the masks would not know by its second half (a tail without a
// newline is dropped). Total then counts cleaned bytes kept plus the raw
// bytes dropped.
func (f *Filter) cleanClipped(c pool.Clipped) pool.Clipped {
	if whole(c) {
		head := f.Clean(c.Head)
		return pool.Clipped{Head: head, Total: len(head)}
	}
	dropped := c.Total - len(c.Head) - len(c.Tail)
	tail := ""
	if i := strings.IndexByte(c.Tail, '\n'); i >= 0 {
		tail = c.Tail[i+1:]
	}
	dropped += len(c.Tail) - len(tail)
	out := pool.Clipped{Head: f.Clean(c.Head), Tail: f.Clean(tail)}
	out.Total = len(out.Head) + max(dropped, 0) + len(out.Tail)
	if whole(out) { // nothing was dropped after all
		out.Head += out.Tail
		out.Tail = ""
	}
	return out
}

// truncateClipped caps a cleaned stream like truncateMiddle; a stream the
// kernel clipped is always truncated, its tail taken from its real end.
func truncateClipped(c pool.Clipped, limit int) (string, bool) {
	if whole(c) {
		return truncateMiddle(c.Head, limit)
	}
	head := min(limit*2/5, len(c.Head))
	for head > 0 && !utf8.RuneStart(c.Head[head]) {
		head--
	}
	tail := max(len(c.Tail)-(limit-head), 0)
	for tail < len(c.Tail) && !utf8.RuneStart(c.Tail[tail]) {
		tail++
	}
	kept := head + len(c.Tail) - tail
	return c.Head[:head] + TruncationNotice(c.Total-kept, c.Total) + c.Tail[tail:], true
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

// capSpill is what a spill holds of a cleaned stream: all of it when it
// fits limit bytes, else its head, the reference's cap notice saying how
// much was left out, and its end (at most a tenth of limit), in limit bytes.
func capSpill(c pool.Clipped, limit int) string {
	if whole(c) && len(c.Head) <= limit {
		return c.Head
	}
	end, room := c.Tail, len(c.Head)
	if whole(c) {
		end = c.Head // its end is cut below; the head stops before it
	}
	if keep := limit / 10; len(end) > keep {
		cut := len(end) - keep
		for cut < len(end) && !utf8.RuneStart(end[cut]) {
			cut++
		}
		end = end[cut:]
	}
	if whole(c) {
		room -= len(end)
	}
	notice := func(omitted int) string {
		return "\n\n[... spill capped at " + groupThousands(limit) + " bytes: " + groupThousands(omitted) + " of " +
			groupThousands(c.Total) + " bytes omitted ...]\n\n"
	}
	// The notice's length depends on the omitted count: measure with the
	// widest count (the total), then with the count that gives; the
	// second cut is no shorter, its notice no longer.
	cut := 0
	for _, omitted := range []int{c.Total, -1} {
		if omitted < 0 {
			omitted = c.Total - cut - len(end)
		}
		cut = min(max(limit-len(notice(omitted))-len(end), 0), room)
		for cut > 0 && cut < len(c.Head) && !utf8.RuneStart(c.Head[cut]) {
			cut--
		}
	}
	return c.Head[:cut] + notice(c.Total-cut-len(end)) + end
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
