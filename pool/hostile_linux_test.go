package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Output a thread of an earlier cell writes while no cell runs (Python
// prints left in the interpreter's buffer, fd-level writes to stdout and
// stderr) reaches no cell; it is dropped and counted exactly, and the
// count is in the kernel listing.
func TestHostileOutputBetweenCells(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) { c.Observer = rec })
	dir := testTempDir(t)
	settled, flag := filepath.Join(dir, "settled"), filepath.Join(dir, "done")
	const lines = 50
	// The thread writes only once the test saw the cell's result (the file
	// settled appears), so every byte lands between cells.
	res := run(t, p, Request{Owner: "a", Code: fmt.Sprintf(`import os, sys, threading, time
def noise():
    while not os.path.exists(%q):
        time.sleep(0.01)
    for i in range(%d):
        print("bg-%%03d" %% i)               # Python-level: buffered, flushed later
        os.write(1, b"fd-%%03d\n" %% i)
        os.write(2, b"er-%%03d\n" %% i)
    open(%q, "w").close()
threading.Thread(target=noise).start()
"started"`, settled, lines, flag)})
	if res.Output != "'started'\n" {
		t.Fatalf("first cell output %q", res.Output)
	}
	if err := os.WriteFile(settled, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the background thread to finish", func() bool { _, err := os.Stat(flag); return err == nil })
	second := run(t, p, Request{Owner: "a", Code: "print('two')"})
	if second.Output != "two\n" {
		t.Fatalf("output written between cells reached the next cell: %q", second.Output)
	}
	ks := p.List()
	if want := int64(lines * 3 * len("bg-000\n")); len(ks) != 1 || ks[0].DroppedOutputBytes != want {
		t.Fatalf("listing %+v, want dropped_output_bytes %d", ks, want)
	}
	// The observer (the metrics) gets the count with the kernel's next
	// cell, and only the bytes dropped since the cell before: nothing was
	// written between the second and third cells.
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "pass"}), StatusSuccess)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := int64(lines * 3 * len("bg-000\n")); len(rec.cells) != 3 || rec.cells[0].BetweenCellsBytes != 0 ||
		rec.cells[1].BetweenCellsBytes != want || rec.cells[2].BetweenCellsBytes != 0 {
		t.Fatalf("cell events %+v, want between-cells bytes 0, %d, 0", rec.cells, want)
	}
}
