package pool

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// closesUpload closes the upload's file under the files API on its first
// Read (as a network filesystem's close can fail: the data never landed)
// and ends the body.
type closesUpload struct{ t *testing.T }

func (r closesUpload) Read([]byte) (int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range entries {
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.Contains(target, ".kernpool-upload-") {
			fd, _ := strconv.Atoi(e.Name())
			_ = unix.Close(fd)
			return 0, io.EOF
		}
	}
	r.t.Fatal("no upload file open")
	return 0, io.EOF
}

// An upload whose file fails to close is an error and leaves nothing:
// neither the file nor its temporary.
func TestFilesWriteFailsOnAFailedClose(t *testing.T) {
	dir := testTempDir(t)
	a := hostArea(dir, 1<<20)
	if n, err := a.write(t.Context(), "up.txt", closesUpload{t}); err == nil {
		t.Fatalf("write: %d bytes, no error; want the close's", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v in the working dir", entries)
	}
}

// An upload whose request ended (its context canceled) while the body
// was read is refused and leaves nothing, however whole the body came.
func TestFilesWriteRefusedOnACanceledRequest(t *testing.T) {
	dir := testTempDir(t)
	a := hostArea(dir, 1<<20)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := a.write(ctx, "up.txt", strings.NewReader("whole body")); !errors.Is(err, context.Canceled) {
		t.Fatalf("write: %d bytes, %v; want context.Canceled", n, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v in the working dir", entries)
	}
}

// A listing of a dir holding exactly as many entries as it may give is
// whole; one more entry truncates it.
func TestFilesListTruncatedOnlyPastTheBound(t *testing.T) {
	for _, tc := range []struct {
		files     int
		truncated bool
	}{{3, false}, {4, true}} {
		dir := testTempDir(t)
		for i := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		a := hostArea(dir, 0)
		l, err := a.list("", 3)
		if err != nil || len(l.Entries) != 3 || l.Truncated != tc.truncated {
			t.Fatalf("%d files listed 3 at most: %+v, %v; want 3 entries, truncated %v", tc.files, l, err, tc.truncated)
		}
	}
}

// The outputs walk goes 16 levels deep (MaxOutputsDepth: the dir walked
// and 15 below it) and no deeper: a tree of 16 levels is listed whole, a
// seventeenth level is left out and truncates the walk.
func TestOutputsWalkDepthBound(t *testing.T) {
	for _, tc := range []struct {
		levels    int
		truncated bool
	}{{16, false}, {17, true}} {
		dir := testTempDir(t)
		cur := filepath.Join(dir, "out")
		var want []string
		for level := range tc.levels {
			if err := os.MkdirAll(cur, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cur, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if rel, _ := filepath.Rel(dir, filepath.Join(cur, "f")); level < 16 {
				want = append(want, rel)
			}
			cur = filepath.Join(cur, "d")
		}
		a := hostArea(dir, 0)
		out, truncated, err := a.walk("out")
		got := slices.Sorted(maps.Keys(out))
		slices.Sort(want)
		if err != nil || truncated != tc.truncated || !slices.Equal(got, want) {
			t.Fatalf("%d levels: %d files %v, truncated %v, %v; want %d files, truncated %v", tc.levels, len(got), got, truncated, err, len(want), tc.truncated)
		}
	}
}

// hostArea is a files area over dir as the test process (no kernel uid,
// never ended), with maxBytes as its upload cap.
func hostArea(dir string, maxBytes int64) fileArea {
	return fileArea{id: "k1", dir: dir, uid: -1, maxBytes: maxBytes, done: make(chan struct{}), unreaped: func() bool { return true }}
}
