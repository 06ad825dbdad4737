package pool

import (
	"errors"
	"io"
	"os"
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

// A files call on a kernel that ended after its root was opened answers
// ErrNotFound and closes that root (a daemon leaks no fd per call).
func TestFilesOnAnEndedKernelLeakNoFd(t *testing.T) {
	ended := make(chan struct{})
	close(ended)
	// The test's own pid stands for the kernel: its /proc root opens.
	a := fileArea{id: "k1", dir: "/", pid: os.Getpid(), uid: -1, mountNS: true, done: ended, unreaped: func() bool { return true }}
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := fds()
	for range 10 {
		if err := a.inArea(func(int) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("inArea of an ended kernel: %v, want ErrNotFound", err)
		}
	}
	if after := fds(); after != before {
		t.Fatalf("%d fds open after 10 calls, %d before", after, before)
	}
}
