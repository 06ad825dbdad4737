package kernel

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The bounds are near the runner's worst case, not below it: an honest
// cell at every cap at once settles normally, within the frame limit and
// the kernel's budget. Two worst cases: 4-byte characters (the most
// decoded bytes, near the budget) and control characters (escaped 6 bytes
// each, the longest frame, near the frame limit). Both also fill the
// cell's displays (DisplayCellBytes) and fd-level streams: the budget
// counts each, and an honest cell may use them all at once.
func TestHonestWorstCaseFitsTheBounds(t *testing.T) {
	cases := []struct {
		name, char string
		runeLen    int
		minCharged int64
	}{
		{"4-byte characters", `\U0001F600`, 4, 8_000_000},
		{"control characters", `\x01`, 1, 8_000_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := baseSpec(t)
			k := startKernel(t, spec, "")
			r := mustExec(t, k, `import os, sys
class D:
    def _repr_html_(self): return "h" * 4_100_000
    def __repr__(self): return "D()"
display(D())
sys.stdout.write("`+c.char+`" * 1_100_000)
sys.stderr.write("`+c.char+`" * 1_100_000)
os.write(1, b"y" * 1_100_000)
os.write(2, b"z" * 1_100_000)
raise ValueError("v" * 200_000)`)
			if r.Status != "error" || !r.StdoutClipped || len(r.Displays) != 1 {
				t.Fatalf("status %q clipped %v, %d displays", r.Status, r.StdoutClipped, len(r.Displays))
			}
			if len(r.Stdout) != CaptureChars || len(r.StdoutTail) != DefaultTailBytes || r.StdoutBytesTotal != 1_100_000*(c.runeLen+1) {
				t.Fatalf("stdout %d + %d bytes of %d", len(r.Stdout), len(r.StdoutTail), r.StdoutBytesTotal)
			}
			if !utf8.ValidString(r.Stdout) || r.StdoutTail != strings.Repeat("y", DefaultTailBytes) {
				t.Fatalf("stdout cut inside a character, or its tail is not the fd-level end")
			}
			if len(r.Stderr) != CaptureChars || r.StderrTail != strings.Repeat("z", DefaultTailBytes) || len(r.Traceback) > TracebackBytes || !strings.Contains(r.Traceback, "OUTPUT TRUNCATED") {
				t.Fatalf("stderr %d bytes, traceback %d bytes", len(r.Stderr), len(r.Traceback))
			}
			peak, limit := k.cell.acct.peak.Load(), spec.Budget()
			t.Logf("daemon memory charged for the cell: %d of a %d-byte budget", peak, limit)
			if peak > limit || peak < c.minCharged {
				t.Fatalf("charged %d bytes, want between %d and the budget %d", peak, c.minCharged, limit)
			}
			mustExec(t, k, "1") // still in sync
		})
	}
}
