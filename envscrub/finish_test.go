package envscrub

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kernpool/kernpool/integration/wine/wintest"
	"github.com/kernpool/kernpool/pool"
)

func TestTruncationNoticeWording(t *testing.T) {
	got := TruncationNotice(950_000, 1_000_000)
	want := "\n\n... [OUTPUT TRUNCATED - 950,000 bytes omitted out of 1,000,000 total] ...\n\n"
	if got != want {
		t.Errorf("notice %q, want %q", got, want)
	}
	for n, w := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if g := groupThousands(n); g != w {
			t.Errorf("groupThousands(%d) = %q", n, g)
		}
	}
}

func TestFinishSmallOutputUntouched(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter(nil)
	out, err := f.Finish("hello\n", "warn\n", testTempDir(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := pool.CellOutput{Stdout: "hello\n", Stderr: "warn\n", StdoutBytesTotal: 6, StderrBytesTotal: 5}
	if out != want {
		t.Errorf("got %+v", out)
	}
}

// A 1 MB output: exact head/notice/tail, a 0640 spill file in a 0700 dir
// holding the full redacted text, named in the warning.
func TestFinishTruncatesAndSpills(t *testing.T) {
	secret := "s3cret-value-from-env"
	line := "row " + secret + " sk-proj-abcdefghijklmnopqrstuvwxyz " + strings.Repeat("x", 40) + "\n"
	var b strings.Builder
	for b.Len() < 1_000_000 {
		b.WriteString(line)
	}
	raw := b.String()
	f := NewPipeline(OutputConfig{}).Filter([]string{secret})
	dir := filepath.Join(testTempDir(t), "spill")
	out, err := f.Finish(raw, "", dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	clean := f.Clean(raw)
	if strings.Contains(clean, secret) || strings.Contains(clean, "abcdefghijklmnop") {
		t.Fatal("clean text still holds a secret")
	}
	if !out.StdoutTruncated || out.StdoutBytesTotal != len(clean) {
		t.Fatalf("truncated=%v total=%d want %d", out.StdoutTruncated, out.StdoutBytesTotal, len(clean))
	}
	omitted := len(clean) - 50_000
	want := clean[:20_000] + TruncationNotice(omitted, len(clean)) + clean[len(clean)-30_000:]
	if out.Stdout != want {
		t.Errorf("inline stdout differs from head/notice/tail (len %d, want %d)", len(out.Stdout), len(want))
	}
	wantPath := filepath.Join(dir, "cell_000007_stdout.txt")
	if out.SpillPath != wantPath || !strings.Contains(out.Warning, wantPath) {
		t.Errorf("spill %q warning %q", out.SpillPath, out.Warning)
	}
	data, err := os.ReadFile(wantPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != clean {
		t.Error("spill file is not the full cleaned stdout")
	}
	assertMode(t, wantPath, 0o640)
	assertMode(t, dir, 0o700|os.ModeDir)

	// The same cell again: the file exists, nothing is overwritten.
	out2, err := f.Finish(raw, "", dir, 7)
	if err != nil || out2.SpillPath != "" || !strings.Contains(out2.Warning, "could not be saved") {
		t.Errorf("second spill: %+v %v", out2, err)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "windows" {
		// Windows has ACLs, not permission bits: Go reports 0666/0777 for
		// everything writable, so only the directory bit means anything.
		want &= os.ModeDir
		if fi.Mode()&os.ModeDir != want {
			t.Errorf("%s mode %v, want dir bit %v", path, fi.Mode(), want)
		}
		return
	}
	if fi.Mode()&(os.ModePerm|os.ModeDir) != want {
		t.Errorf("%s mode %v, want %v", path, fi.Mode(), want)
	}
}

func TestSpillCap(t *testing.T) {
	f := NewPipeline(OutputConfig{InlineCap: 100, SpillCap: 1000}).Filter(nil)
	dir := filepath.Join(testTempDir(t), "spill")
	out, err := f.Finish(strings.Repeat("é", 2000), "", dir, 1) // 4000 bytes, 2-byte runes
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out.SpillPath)
	if err != nil {
		t.Fatal(err)
	}
	// The notice (71 bytes) and the end (a tenth of the cap: 50 runes)
	// fit inside the cap: 829 bytes of room, 414 whole runes.
	want := strings.Repeat("é", 414) + "\n\n[... spill capped at 1,000 bytes: 3,072 of 4,000 bytes omitted ...]\n\n" + strings.Repeat("é", 50)
	if string(data) != want || len(data) != 999 {
		t.Errorf("spill = %q (%d bytes)", string(data)[800:], len(data))
	}
	if !utf8.ValidString(out.Stdout) {
		t.Error("inline stdout split a rune")
	}
}

// Cuts move to rune boundaries and the omitted count stays exact.
func TestTruncateOnRuneBoundaries(t *testing.T) {
	s := strings.Repeat("€", 100) // 300 bytes, 3-byte runes
	got, trunc := truncateMiddle(s, 100)
	if !trunc || !utf8.ValidString(got) {
		t.Fatalf("truncated=%v valid=%v", trunc, utf8.ValidString(got))
	}
	// head: 40 -> 39 (13 runes); tail: 300-60=240 is a boundary (80 runes kept: 20).
	want := strings.Repeat("€", 13) + TruncationNotice(240-39, 300) + strings.Repeat("€", 20)
	if got != want {
		t.Errorf("got %q", got)
	}
}

func TestStderrCap(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter(nil)
	errText := strings.Repeat("e", 25_000)
	out, err := f.Finish("ok", errText, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("e", 4_000) + TruncationNotice(15_000, 25_000) + strings.Repeat("e", 6_000)
	if !out.StderrTruncated || out.StderrBytesTotal != 25_000 || out.Stderr != want {
		t.Errorf("stderr truncated=%v total=%d len=%d", out.StderrTruncated, out.StderrBytesTotal, len(out.Stderr))
	}
	if out.SpillPath != "" || out.Warning != "" {
		t.Errorf("stderr alone spills nothing: %+v", out)
	}
}

// Whatever blocks the spill, the inline result comes back with a warning
// and no partial or redirected file exists.
func TestSpillFailuresLoseNothingElse(t *testing.T) {
	big := strings.Repeat("y", 60_000)
	f := NewPipeline(OutputConfig{}).Filter(nil)

	t.Run("no spill dir", func(t *testing.T) {
		out, err := f.Finish(big, "", "", 1)
		if err != nil || !out.StdoutTruncated || out.SpillPath != "" || !strings.Contains(out.Warning, "no spill directory") {
			t.Errorf("%+v %v", out.Warning, err)
		}
	})
	t.Run("missing parent", func(t *testing.T) {
		out, err := f.Finish(big, "", filepath.Join(testTempDir(t), "nope", "spill"), 1)
		if err != nil || out.SpillPath != "" || !strings.Contains(out.Warning, "could not be saved") {
			t.Errorf("%+v %v", out.Warning, err)
		}
	})
	t.Run("spill dir is a symlink", func(t *testing.T) {
		requireRealSymlinks(t)
		base := testTempDir(t)
		target := testTempDir(t)
		if err := os.Symlink(target, filepath.Join(base, "spill")); err != nil {
			t.Fatal(err)
		}
		out, err := f.Finish(big, "", filepath.Join(base, "spill"), 1)
		if err != nil || out.SpillPath != "" {
			t.Errorf("%+v %v", out, err)
		}
		if entries, _ := os.ReadDir(target); len(entries) != 0 {
			t.Errorf("write followed the symlink: %v", entries)
		}
	})
	t.Run("planted file symlink", func(t *testing.T) {
		requireRealSymlinks(t)
		dir := filepath.Join(testTempDir(t), "spill")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(testTempDir(t), "victim")
		if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(dir, "cell_000001_stdout.txt")); err != nil {
			t.Fatal(err)
		}
		out, err := f.Finish(big, "", dir, 1)
		if err != nil || out.SpillPath != "" || !out.StdoutTruncated {
			t.Errorf("%+v %v", out, err)
		}
		if data, _ := os.ReadFile(victim); string(data) != "keep" {
			t.Errorf("victim overwritten: %q", data)
		}
	})
	t.Run("spill dir is a file", func(t *testing.T) {
		file := filepath.Join(testTempDir(t), "spill")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := f.Finish(big, "", file, 1)
		if err != nil || out.SpillPath != "" || !strings.Contains(out.Warning, "not a directory") {
			t.Errorf("%+v %v", out.Warning, err)
		}
	})
	t.Run("negative cell", func(t *testing.T) {
		out, err := f.Finish(big, "", testTempDir(t), -1)
		if !errors.Is(err, ErrInvalidArgument) || !out.StdoutTruncated || len(out.Stdout) == 0 {
			t.Errorf("%+v %v", out.Warning, err)
		}
	})
}

// 10 spilling cells against a quota of 4 spills: the oldest go first and
// the files left hold at most the quota.
func TestSpillQuotaRemovesOldest(t *testing.T) {
	if wintest.OnWine() {
		t.Skip("Wine cannot remove a file through an os.Root (removeat: Invalid function)")
	}
	f := NewPipeline(OutputConfig{InlineCap: 10, SpillCap: 100}).Filter(nil)
	dir := filepath.Join(testTempDir(t), "spill")
	for cell := 1; cell <= 10; cell++ {
		out, err := f.Finish(strings.Repeat("x", 1000), "", dir, cell)
		if err != nil || out.SpillPath == "" {
			t.Fatalf("cell %d: %+v %v", cell, out, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	total := int64(0)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name())
		total += info.Size()
	}
	want := "cell_000007_stdout.txt cell_000008_stdout.txt cell_000009_stdout.txt cell_000010_stdout.txt"
	if strings.Join(names, " ") != want || total != 400 {
		t.Fatalf("spill dir holds %v (%d bytes), want %s (400 bytes)", names, total, want)
	}
}

// A stream the kernel clipped: the inline tail and the spill's end are its
// real end; the tail's first (partial) line is dropped, so a secret the
// kernel's cut split in two never shows by its second half; the totals
// count what was dropped.
func TestFinishClipped(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	f := NewPipeline(OutputConfig{InlineCap: 100, SpillCap: 1000}).Filter([]string{secret})
	dir := filepath.Join(testTempDir(t), "spill")
	head := strings.Repeat("h", 2000)
	tail := secret[5:] + "\n" + strings.Repeat("t", 20) + "\nthe real end\n"
	out, err := f.FinishClipped(pool.Clipped{Head: head, Tail: tail, Total: 10_000}, pool.Clipped{Head: "e"}, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !out.StdoutTruncated || !strings.HasSuffix(out.Stdout, "tt\nthe real end\n") || strings.Contains(out.Stdout, secret[5:]) {
		t.Fatalf("inline stdout %q", out.Stdout)
	}
	if out.StdoutBytesTotal != 10_000 || !strings.Contains(out.Stdout, "bytes omitted out of 10,000 total") {
		t.Fatalf("total %d, inline %q", out.StdoutBytesTotal, out.Stdout)
	}
	data, err := os.ReadFile(out.SpillPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 1000 || !strings.HasPrefix(string(data), "hhh") || !strings.HasSuffix(string(data), "t\nthe real end\n") ||
		strings.Contains(string(data), secret[5:]) || !strings.Contains(string(data), " of 10,000 bytes omitted") {
		t.Fatalf("spill %d bytes: %q", len(data), data)
	}
	if out.Stderr != "e" || out.StderrTruncated {
		t.Fatalf("stderr %q", out.Stderr)
	}
}

// A kernel that kept less than the spill cap of a clipped stream (its
// caps are its own): the spill is all of the head, the notice and the end.
func TestSpillOfAShortClippedHead(t *testing.T) {
	f := NewPipeline(OutputConfig{InlineCap: 100, SpillCap: 100_000}).Filter(nil)
	dir := filepath.Join(testTempDir(t), "spill")
	head := strings.Repeat("é", 500) // 1,000 bytes
	out, err := f.FinishClipped(pool.Clipped{Head: head, Tail: "x\nend\n", Total: 1_000_000}, pool.Clipped{}, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out.SpillPath)
	want := head + "\n\n[... spill capped at 100,000 bytes: 998,996 of 1,000,000 bytes omitted ...]\n\nend\n"
	if err != nil || string(data) != want {
		t.Fatalf("spill %q, %v", data, err)
	}
}
