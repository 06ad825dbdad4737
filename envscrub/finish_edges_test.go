package envscrub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// A stream the kernel clipped, capped inline at 100 bytes: exactly 40 of
// the head, the notice with the exact omitted count, and the tail's last
// bytes up to 100 kept, each cut moved off a split rune; the tail's first
// line goes even when it is empty. Every expected value is written out.
func TestFinishClippedExactCuts(t *testing.T) {
	h, tt := strings.Repeat("H", 300), strings.Repeat("T", 200)
	notice := func(omitted string) string {
		return "\n\n... [OUTPUT TRUNCATED - " + omitted + " bytes omitted out of 10,000 total] ...\n\n"
	}
	for _, c := range []struct {
		name       string
		head, tail string
		want       string
	}{
		{"plain", h, "x\n" + tt, h[:40] + notice("9,900") + tt[:60]},
		{"tail opens with its newline", h, "\n" + tt, h[:40] + notice("9,900") + tt[:60]},
		{"tail without a newline", h, "no newline", h[:40] + notice("9,960")},
		// An é over the head's cut at 40: the head stops before it.
		{"rune at the head cut", h[:39] + "é" + h[:259], "x\n" + tt, h[:39] + notice("9,900") + tt[:61]},
		// An é over the tail's cut at 140: the tail starts after it.
		{"rune at the tail cut", h, "x\n" + tt[:139] + "é" + tt[:59], h[:40] + notice("9,901") + tt[:59]},
	} {
		f := NewPipeline(OutputConfig{InlineCap: 100, SpillCap: 1000}).Filter(nil)
		out, err := f.FinishClipped(pool.Clipped{Head: c.head, Tail: c.tail, Total: 10_000}, pool.Clipped{}, "", 1)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !out.StdoutTruncated || out.StdoutBytesTotal != 10_000 || out.Stdout != c.want {
			t.Errorf("%s: truncated=%v total=%d stdout\n%q\nwant\n%q", c.name, out.StdoutTruncated, out.StdoutBytesTotal, out.Stdout, c.want)
		}
	}
}

// Output of exactly the cap is kept whole; one byte more is truncated.
func TestCapsAtTheLimit(t *testing.T) {
	f := NewPipeline(OutputConfig{InlineCap: 100}).Filter(nil)
	out, err := f.Finish(strings.Repeat("o", 100), strings.Repeat("e", 10_000), "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if out.StdoutTruncated || out.Stdout != strings.Repeat("o", 100) || out.StderrTruncated || len(out.Stderr) != 10_000 || out.Warning != "" {
		t.Fatalf("at the caps: stdout truncated=%v len %d, stderr truncated=%v len %d, warning %q",
			out.StdoutTruncated, len(out.Stdout), out.StderrTruncated, len(out.Stderr), out.Warning)
	}
	out, err = f.Finish(strings.Repeat("o", 101), strings.Repeat("e", 10_001), "", 1)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := strings.Repeat("o", 40) + "\n\n... [OUTPUT TRUNCATED - 1 bytes omitted out of 101 total] ...\n\n" + strings.Repeat("o", 60)
	wantErr := strings.Repeat("e", 4_000) + "\n\n... [OUTPUT TRUNCATED - 1 bytes omitted out of 10,001 total] ...\n\n" + strings.Repeat("e", 6_000)
	if !out.StdoutTruncated || out.Stdout != wantOut || !out.StderrTruncated || out.Stderr != wantErr {
		t.Fatalf("one past the caps: stdout truncated=%v %q, stderr truncated=%v len %d",
			out.StdoutTruncated, out.Stdout, out.StderrTruncated, len(out.Stderr))
	}
}

// Cell 0 is a cell like any other: its truncated output spills.
func TestCellZeroSpills(t *testing.T) {
	f := NewPipeline(OutputConfig{InlineCap: 10, SpillCap: 1000}).Filter(nil)
	dir := filepath.Join(testTempDir(t), "spill")
	out, err := f.Finish(strings.Repeat("z", 50), "", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "cell_000000_stdout.txt"); out.SpillPath != want {
		t.Fatalf("cell 0: spill %q, warning %q; want %s", out.SpillPath, out.Warning, want)
	}
}

// A cut landing inside the last rune of the text moves past it, to the
// text's end: "𝄞" is 4 bytes, and a 5-byte cap keeps its last 3.
func TestTruncateCutInTheLastRune(t *testing.T) {
	f := NewPipeline(OutputConfig{InlineCap: 5}).Filter(nil)
	out, err := f.Finish("aaaaaaaa𝄞", "", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "aa\n\n... [OUTPUT TRUNCATED - 10 bytes omitted out of 12 total] ...\n\n"; out.Stdout != want {
		t.Fatalf("stdout %q, want %q", out.Stdout, want)
	}
}

// The spill holds a whole output of exactly the spill cap unchanged; a
// spill's end (a tenth of the cap) whose cut lands in its last rune moves
// past it; and a capped spill of a 1,000,900-byte stream is exactly the
// cap: 823 bytes of head, a notice for 999,977 bytes, 100 of the end
// (measured first with the total's 9-digit count, then with the 7-digit
// count that gives).
func TestSpillCapEdges(t *testing.T) {
	dir := filepath.Join(testTempDir(t), "spill")
	read := func(out pool.CellOutput) string {
		t.Helper()
		b, err := os.ReadFile(out.SpillPath)
		if err != nil {
			t.Fatalf("spill: %v (warning %q)", err, out.Warning)
		}
		return string(b)
	}
	f := NewPipeline(OutputConfig{InlineCap: 10, SpillCap: 1000}).Filter(nil)
	out, err := f.Finish(strings.Repeat("s", 1000), "", dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(out); got != strings.Repeat("s", 1000) {
		t.Fatalf("spill of exactly the cap: %d bytes %q...", len(got), got[:min(len(got), 80)])
	}

	f = NewPipeline(OutputConfig{InlineCap: 10, SpillCap: 20}).Filter(nil)
	out, err = f.Finish(strings.Repeat("s", 40)+"€", "", dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "\n\n[... spill capped at 20 bytes: 43 of 43 bytes omitted ...]\n\n"
	if got := read(out); got != want {
		t.Fatalf("spill with its end cut in its last rune: %q, want %q", got, want)
	}

	f = NewPipeline(OutputConfig{InlineCap: 10, SpillCap: 1000}).Filter(nil)
	out, err = f.FinishClipped(pool.Clipped{Head: strings.Repeat("a", 5000), Tail: "x\n" + strings.Repeat("b", 500), Total: 1_000_900}, pool.Clipped{}, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Repeat("a", 823) + "\n\n[... spill capped at 1,000 bytes: 999,977 of 1,000,900 bytes omitted ...]\n\n" + strings.Repeat("b", 100)
	if got := read(out); got != want {
		t.Fatalf("capped spill of a clipped stream: %d bytes %q, want %d bytes", len(got), got, len(want))
	}
}
