package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// The walk looks at 2^20 entries at most (docs/ops.md): a tree of exactly
// that many is scrubbed whole with no bound reported; one entry more and
// the scrub stops at the bound, counting the entry it stopped at, and
// does not count as failed.
func TestScrubVisitBoundIsTwoToTheTwenty(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, limit = 61965, 1 << 20
	dir := scrubTmpfs(t, limit+16)
	// limit entries: the uid's file, root's file and limit-2 hard links
	// of it (cheap: one inode).
	flood(t, dir, uid, 1)
	if err := os.WriteFile(filepath.Join(dir, "theirs"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	links := func(from, to int) {
		t.Helper()
		dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dfd)
		for i := from; i < to; i++ {
			if err := unix.Linkat(dfd, "theirs", dfd, "l"+strconv.Itoa(i), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	links(0, limit-2)
	res, err := scrubUID([]string{dir}, uid)
	if err != nil || res != (scrubResult{Removed: 1, Visited: limit}) {
		t.Fatalf("scrub of %d entries = %+v, %v; want the uid's file removed, %d looked at, no bound", limit, res, err, limit)
	}
	links(limit-2, limit) // limit-1 entries left, 2 more
	res, err = scrubUID([]string{dir}, uid)
	if !errors.Is(err, errScrubBound) || scrubFailed(err) || res != (scrubResult{Removed: 0, Visited: limit + 1}) {
		t.Errorf("scrub of %d entries = %+v, %v; want the bound at entry %d, not a failure", limit+1, res, err, limit+1)
	}
}

// fdsTo lists the fds of this process open on path or below it, but not
// on except (a fanotify event's).
func fdsTo(t *testing.T, path, except string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	for _, e := range ents {
		to, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || to == except || to != path && !strings.HasPrefix(to, path+"/") {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		fds = append(fds, fd)
	}
	return fds
}

// withoutStdin runs fn with fd 0 closed, as in a program embedding
// isolate that closed its stdin (the Go runtime reopens a closed fd 0 on
// /dev/null only at start): the next fd opened is 0.
func withoutStdin(t *testing.T, fn func()) {
	t.Helper()
	saved, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = unix.Dup3(saved, 0, 0)
		_ = unix.Close(saved)
	}()
	if err := unix.Close(0); err != nil {
		t.Fatal(err)
	}
	fn()
}

// The walk holds at most 64 directory fds however deep the tree
// (docs/design.md), and none once the scrub returns, whichever fd numbers
// it got: here its first, the root's, is fd 0. The uid's file at the
// bottom of another uid's world-writable chain goes, each entry looked at
// once.
func TestScrubHoldsAtMost64DirectoryFDs(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other, held = 61966, 61967, 64
	for _, depth := range []int{1, held + 2} {
		t.Run(fmt.Sprintf("depth %d", depth), func(t *testing.T) {
			dir := scrubTestDir(t)
			bottom := mkChain(t, dir, "shared", other, 0o777, depth)
			f, err := unix.Openat(bottom, "mine", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err == nil {
				err = unix.Fchown(f, uid, uid)
				_ = unix.Close(f)
			}
			_ = unix.Close(bottom)
			if err != nil {
				t.Fatal(err)
			}
			top := filepath.Join(dir, "shared")
			bottomPath := top + strings.Repeat("/d", depth-1)
			gateTop := gateOpens(t, top)
			var gateBottom *openGate
			if depth > 1 {
				gateBottom = gateOpens(t, bottomPath)
			}
			withoutStdin(t, func() {
				done := make(chan struct{})
				var res scrubResult
				var err error
				go func() {
					defer close(done)
					res, err = scrubUID([]string{dir}, uid)
				}()
				gateTop.await(t, done, func() {
					if got := fdsTo(t, dir, top); len(got) != 1 || got[0] != 0 {
						t.Errorf("fds on the scrubbed tree when entering it: %v, want [0] (the root's)", got)
					}
				})
				gateTop.release() // the way up reopens it through ".."
				if gateBottom != nil {
					// depth frames on the stack: root and the chain above the bottom.
					gateBottom.await(t, done, func() {
						if got := fdsTo(t, dir, bottomPath); len(got) != held {
							t.Errorf("%d fds on the tree %d dirs down (%v), want %d", len(got), depth, got, held)
						}
					})
					gateBottom.release()
				}
				<-done
				if err != nil || res != (scrubResult{Removed: 1, Visited: depth + 1}) {
					t.Errorf("scrub = %+v, %v; want the uid's file removed, %d entries looked at", res, err, depth+1)
				}
				if got := fdsTo(t, dir, ""); len(got) != 0 {
					t.Errorf("fds left on the tree after the scrub: %v", got)
				}
			})
			if err := unix.Access(filepath.Join(bottomPath, "mine"), unix.F_OK); !errors.Is(err, unix.ENOENT) {
				t.Errorf("the uid's file at depth %d: %v, want it gone", depth, err)
			}
		})
	}
}

// A directory the walk cannot read (getdents fails, as on an I/O error;
// here its fd stops being a directory's under the walk) may hold leftovers
// the scrub never saw: the scrub reports the error and counts as failed
// (the uid retires until a scrub is clean), and goes on with its next dir.
func TestScrubReportsADirectoryItCannotRead(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other = 61968, 61969
	dir, next := scrubTestDir(t), scrubTestDir(t)
	_ = unix.Close(mkChain(t, dir, "shared", other, 0o777, 1))
	flood(t, next, uid, 3)
	top := filepath.Join(dir, "shared")
	gate := gateOpens(t, top)
	done := make(chan struct{})
	var res scrubResult
	var err error
	go func() {
		defer close(done)
		res, err = scrubUID([]string{dir, next}, uid)
	}()
	gate.await(t, done, func() {
		fds := fdsTo(t, dir, top)
		if len(fds) != 1 {
			t.Errorf("fds on the scrubbed dir: %v, want one (the walk's)", fds)
			return
		}
		null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Dup3(null, fds[0], unix.O_CLOEXEC) // the walk closes it
			_ = unix.Close(null)
		}
		if err != nil {
			t.Error(err)
		}
	})
	<-done
	if !errors.Is(err, unix.ENOTDIR) || !scrubFailed(err) {
		t.Errorf("scrub of a dir it cannot read = %v; want it failed with ENOTDIR", err)
	}
	if res.Removed != 3 || countEntries(t, next) != 0 {
		t.Errorf("removed %d entries, %d left in the next dir; want its 3 removed, none left", res.Removed, countEntries(t, next))
	}
}
