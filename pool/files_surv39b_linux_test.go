package pool

import (
	"io"
	"strings"
	"testing"
)

// Without a sandbox (no mount namespace: the kernel sees the daemon's
// filesystem) the files API reads what a cell wrote in its working dir,
// and a cell reads what the API wrote.
func TestFilesWithoutASandbox(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: "open('note.txt', 'w').write('from the cell')"})
	wantStatus(t, res, StatusSuccess)
	rc, size, err := p.OpenFile(res.Kernel.ID, "note.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || string(b) != "from the cell" || size != 13 {
		t.Fatalf("read %q (%d bytes), %v; want the cell's 13 bytes", b, size, err)
	}
	if n, err := p.WriteFile(t.Context(), res.Kernel.ID, "in.txt", strings.NewReader("to the cell"), 11); err != nil || n != 11 {
		t.Fatalf("write: %d, %v", n, err)
	}
	if res := run(t, p, Request{Code: "print(open('in.txt').read())"}); res.Output != "to the cell\n" {
		t.Fatalf("the cell read %q", res.Output)
	}
}
