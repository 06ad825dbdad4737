package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// openGate holds the next open(2) of one directory until the test has
// changed the tree: a fanotify permission event, so a tenant's move or
// removal lands at an exact point of the scrub's walk, with no timing.
type openGate struct {
	fd int
}

func gateOpens(t *testing.T, dir string) *openGate {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY)
	if err != nil {
		t.Skipf("fanotify permission events unavailable: %v", err)
	}
	g := &openGate{fd: fd}
	t.Cleanup(g.release)
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN_PERM|unix.FAN_ONDIR, unix.AT_FDCWD, dir); err != nil {
		t.Skipf("fanotify mark: %v", err)
	}
	return g
}

// release ends the gate: later opens of its directory go on unheld (a
// walk reopening it through ".." on its way up).
func (g *openGate) release() {
	if g.fd >= 0 {
		_ = unix.Close(g.fd)
		g.fd = -1
	}
}

// await returns once some process is held opening the directory, then
// runs change and lets the open go on. It fails the test when done
// closes first (the walk never opened it).
func (g *openGate) await(t *testing.T, done <-chan struct{}, change func()) {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	buf := make([]byte, 4096)
	for {
		select {
		case <-done:
			t.Fatal("the scrub ended without opening the gated directory")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no open of the gated directory")
		}
		pfd := []unix.PollFd{{Fd: int32(g.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, 100); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
		n, err := unix.Read(g.fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n < int(unsafe.Sizeof(unix.FanotifyEventMetadata{})) {
			t.Fatalf("read fanotify: %d, %v", n, err)
		}
		ev := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[0]))
		change()
		resp := unix.FanotifyResponse{Fd: ev.Fd, Response: unix.FAN_ALLOW}
		_, err = unix.Write(g.fd, (*[unsafe.Sizeof(resp)]byte)(unsafe.Pointer(&resp))[:])
		_ = unix.Close(int(ev.Fd))
		if err != nil {
			t.Fatalf("answer fanotify: %v", err)
		}
		return
	}
}

// scrubAsync runs scrubUID in the background; its result arrives on the
// returned channel after done closes.
func scrubAsync(dir string, uid int) (done chan struct{}, result *error) {
	done, result = make(chan struct{}), new(error)
	go func() {
		defer close(done)
		_, *result = scrubUID([]string{dir}, uid)
	}()
	return done, result
}

// causes counts the errors err joins, through any wrapping.
func causes(err error) int {
	switch e := err.(type) {
	case nil:
		return 0
	case interface{ Unwrap() []error }:
		n := 0
		for _, c := range e.Unwrap() {
			n += causes(c)
		}
		return n
	case interface{ Unwrap() error }:
		if c := e.Unwrap(); c != nil {
			return causes(c)
		}
	}
	return 1
}

// A tenant that moves a directory of a world-writable chain while the
// scrub is below it (deeper than the fds the walk holds) cannot lead the
// walk up a path it did not come down: reopening ".." finds another
// directory, and the scrub stops there with errScrubMoved, one error,
// touching nothing through the lost path (the uid counts as failed and
// retires until it is clean).
func TestScrubStopsWhereATenantMovedItsPath(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other, depth = 61997, 61998, scrubHeldFDs + 5
	dir := scrubTestDir(t)
	bottom := mkChain(t, dir, "shared", other, 0o777, depth)
	_ = unix.Close(bottom)
	bottomPath := filepath.Join(dir, "shared")
	for i := 1; i < depth; i++ {
		bottomPath = filepath.Join(bottomPath, "d")
	}
	gate := gateOpens(t, bottomPath)
	done, result := scrubAsync(dir, uid)
	gate.await(t, done, func() {
		// shared/d leaves shared for the top dir: its ".." is now dir.
		if err := os.Rename(filepath.Join(dir, "shared", "d"), filepath.Join(dir, "moved")); err != nil {
			t.Error(err)
		}
	})
	<-done
	err := *result
	if !errors.Is(err, errScrubMoved) {
		t.Fatalf("scrub after the move: %v, want errScrubMoved", err)
	}
	if n := causes(err); n != 1 {
		t.Errorf("scrub after the move gave %d errors (%v), want 1: it must stop where the path was lost", n, err)
	}
	if !scrubFailed(err) {
		t.Error("a scrub that lost its path does not count as failed: the uid would be leased again with leftovers")
	}
}

// A directory another tenant removes while the scrub opens it is empty
// by then and holds nothing of uid's: the walk treats it as done and the
// scrub does not fail (a failure retires the uid), while the uid's files
// elsewhere still go.
func TestScrubDirectoryRemovedUnderTheWalk(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other = 61999, 61998
	dir := scrubTestDir(t)
	_ = unix.Close(mkChain(t, dir, "shared", other, 0o777, 2))
	flood(t, dir, uid, 3)
	gated := filepath.Join(dir, "shared", "d")
	gate := gateOpens(t, gated)
	done, result := scrubAsync(dir, uid)
	gate.await(t, done, func() {
		if err := os.Remove(gated); err != nil {
			t.Error(err)
		}
	})
	<-done
	if err := *result; err != nil {
		t.Fatalf("scrub with a directory removed under it: %v, want no error", err)
	}
	if got := countEntries(t, dir); got != 1 {
		t.Errorf("%d entries left in the top dir, want 1 (shared): the uid's files must go", got)
	}
}
