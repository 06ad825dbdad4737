package pool

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// OpenSpill opens a live kernel's spill file by the name its result
// gives, with the whole stdout; a name that is not there is not found.
func TestOpenSpillReadsTheCellsSpill(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.Output = maskFactory{&secretRecorder{}} })
	res := run(t, p, Request{Code: "print('s' * 300)"})
	wantStatus(t, res, StatusSuccess)
	if res.StdoutSpillName == "" {
		t.Fatalf("a 301-byte stdout was not spilled: %+v", res)
	}
	f, err := p.OpenSpill(res.Kernel.ID, res.StdoutSpillName)
	if err != nil {
		t.Fatalf("OpenSpill(%s, %s): %v", res.Kernel.ID, res.StdoutSpillName, err)
	}
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || string(b) != strings.Repeat("s", 300)+"\n" {
		t.Fatalf("spill holds %d bytes (%v), want the 301 printed", len(b), err)
	}
	if _, err := p.OpenSpill(res.Kernel.ID, "cell_999999_stdout.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenSpill of a missing file: %v, want ErrNotFound", err)
	}
}
