package isolate

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// hostWalkFirst..hostWalkLast is these tests' kernel uid range.
const hostWalkFirst, hostWalkLast = 61990, 61999

// walkRoot is an empty root for a walk, searchable by everyone.
func walkRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// mkWalkDir makes root/rel with mode, owned by uid:gid.
func mkWalkDir(t *testing.T, root, rel string, mode os.FileMode, uid, gid int) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// relPaths is ps relative to root, space-separated.
func relPaths(root string, ps []string) string {
	var out []string
	for _, p := range ps {
		r, _ := filepath.Rel(root, p)
		out = append(out, r)
	}
	return strings.Join(out, " ")
}

// The walk goes below a dir exactly when a kernel uid can search it: by
// its x bit for others, for its owner when that is a range uid, for its
// group when that is a range gid. A world-writable dir below is found
// (read-only) where the walk goes, and only there.
func TestHostWalkDescendsWhereKernelsCanSearch(t *testing.T) {
	testenv.RequireRoot(t)
	in, out := hostWalkFirst+2, hostWalkLast+1
	for _, c := range []struct {
		name     string
		mode     os.FileMode
		uid, gid int
		readOnly string // what the walk finds, below root
	}{
		{"range owner may search", 0o700, in, 0, "d d/w"},
		{"range owner may not search", 0o600, in, 0, "d"}, // its own dir: read-only whatever its mode
		{"range group may search", 0o750, 0, in, "d/w"},
		{"range group may not search", 0o740, 0, in, ""},
		{"others may search", 0o711, 0, 0, "d/w"},
		{"only root may search", 0o750, 0, 0, ""},
		{"owner outside the range", 0o700, out, out, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := walkRoot(t)
			mkWalkDir(t, root, "d", c.mode, c.uid, c.gid)
			mkWalkDir(t, root, "d/w", 0o777, 0, 0)
			hp, err := hostWritable(root, hostWalkFirst, hostWalkLast, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := relPaths(root, hp.ReadOnly); got != c.readOnly || len(hp.Private) != 0 {
				t.Errorf("d %o owned by %d:%d: read-only %q, private %q; want read-only %q, no private",
					c.mode, c.uid, c.gid, got, relPaths(root, hp.Private), c.readOnly)
			}
		})
	}
}

// The walk refuses a host with more directories than its bound, and walks
// one with exactly that many.
func TestHostWalkDirBound(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		dirs    int
		refused bool
	}{{4, false}, {5, false}, {6, true}} {
		t.Run(fmt.Sprint(c.dirs), func(t *testing.T) {
			root := walkRoot(t)
			mkWalkDir(t, root, "a", 0o755, 0, 0)
			for i := 1; i < c.dirs; i++ { // a, a/1, a/2, ...: nested and side by side
				mkWalkDir(t, root, filepath.Join("a", fmt.Sprint(i)), 0o755, 0, 0)
			}
			hp, err := hostWalk{first: hostWalkFirst, last: hostWalkLast, maxDirs: 5}.walk(root)
			if c.refused {
				if err == nil || !strings.Contains(err.Error(), "more than 5 directories") {
					t.Fatalf("%d dirs with a bound of 5: %v, want refused", c.dirs, err)
				}
				return
			}
			if err != nil || hp.Dirs != c.dirs {
				t.Fatalf("%d dirs with a bound of 5: %d looked at, %v; want %d, no error", c.dirs, hp.Dirs, err, c.dirs)
			}
		})
	}
}

// direntRec is a getdents64 record: ino, off, reclen, type, then name padded
// with NULs to reclen (name is cut where it does not fit).
func direntRec(typ byte, name string, reclen int) []byte {
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b[0:8], 42)
	binary.NativeEndian.PutUint64(b[8:16], 7)
	binary.NativeEndian.PutUint16(b[16:18], uint16(reclen))
	if reclen > 18 {
		b[18] = typ
		copy(b[19:], name)
	}
	return b
}

// withReclen is record b claiming reclen n.
func withReclen(b []byte, n int) []byte {
	binary.NativeEndian.PutUint16(b[16:18], uint16(n))
	return b
}

// The walk's getdents parser, on records the kernel writes and on ones it
// never does (a parser must not lose the entries after an odd record, nor
// read past one).
func TestDirentDirs(t *testing.T) {
	cat := func(rs ...[]byte) []byte { return slices.Concat(rs...) }
	for _, c := range []struct {
		name string
		buf  []byte
		want []string
	}{
		{"a dir", direntRec(unix.DT_DIR, "sub", 24), []string{"sub"}},
		{"dot and dotdot", cat(direntRec(unix.DT_DIR, ".", 24), direntRec(unix.DT_DIR, "..", 24)), nil},
		{"no d_type: may be a dir", direntRec(unix.DT_UNKNOWN, "u", 24), []string{"u"}},
		{"file, symlink, fifo, socket, devices", cat(direntRec(unix.DT_REG, "f", 24), direntRec(unix.DT_LNK, "l", 24),
			direntRec(unix.DT_FIFO, "p", 24), direntRec(unix.DT_SOCK, "s", 24), direntRec(unix.DT_CHR, "c", 24), direntRec(unix.DT_BLK, "b", 24)), nil},
		{"name fills the record, no NUL", direntRec(unix.DT_DIR, "abcde", 24), []string{"abcde"}},
		{"name ends at its NUL", direntRec(unix.DT_DIR, "ab\x00cd", 24), []string{"ab"}},
		{"name is a NUL", direntRec(unix.DT_DIR, "", 24), []string{""}},
		{"19 bytes: no room for a name", direntRec(unix.DT_DIR, "", 19), []string{""}},
		{"19 bytes, then a dir", cat(direntRec(unix.DT_DIR, "", 19), direntRec(unix.DT_DIR, "sub", 24)), []string{"", "sub"}},
		{"reclen 18 ends the parse", cat(withReclen(direntRec(unix.DT_DIR, "x", 24), 18), direntRec(unix.DT_DIR, "sub", 24)), nil},
		{"reclen past the buffer", direntRec(unix.DT_DIR, "sub", 24)[:23], nil},
		{"18 bytes left after a dir", cat(direntRec(unix.DT_DIR, "sub", 24), make([]byte, 18)), []string{"sub"}},
		{"empty", nil, nil},
	} {
		if got := direntDirs(c.buf, nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// What getdents writes for a real directory parses to its subdirectories.
func TestDirentDirsReadsGetdents(t *testing.T) {
	d := t.TempDir()
	for _, n := range []string{"one", "two", "a name of 24 bytes.....", "a name of 21 bytes..."} {
		if err := os.Mkdir(filepath.Join(d, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var got []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		got = direntDirs(buf[:n], got)
	}
	slices.Sort(got)
	if want := []string{"a name of 21 bytes...", "a name of 24 bytes.....", "one", "two"}; !slices.Equal(got, want) {
		t.Errorf("subdirs %q, want %q", got, want)
	}
}

// The pseudo-mount finder's mountinfo parser: the mount point is field 5
// (octal escapes undone), the type the first field after " - ".
func TestParseMountinfo(t *testing.T) {
	for _, c := range []struct {
		line string
		want []mountLine
	}{
		{"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue", []mountLine{{"/mnt2", "ext3"}}},
		{"22 1 0:21 / /proc rw,nosuid - proc proc rw", []mountLine{{"/proc", "proc"}}},
		{"40 1 0:30 / /mnt/a\\040b\\134c\\047 rw - tmpfs tmpfs rw", []mountLine{{"/mnt/a b\\c'", "tmpfs"}}},
		{"40 1 0:30 / \\011tab rw - tmpfs tmpfs rw", []mountLine{{"\ttab", "tmpfs"}}},        // an escape first
		{"40 1 0:30 / /a\\08\\04 rw - tmpfs tmpfs rw", []mountLine{{"/a\\08\\04", "tmpfs"}}}, // no escapes: 8 is no octal digit, \04 too short
		{"1 2 0:3 / /five - tmpfs", []mountLine{{"/five", "tmpfs"}}},                         // exactly 5 fields, then only the type
		{"1 2 0:3 / /six rw - sysfs", []mountLine{{"/six", "sysfs"}}},
		{"1 2 0:3 / - tmpfs tmpfs rw", nil}, // 4 fields: no mount point
		{"1 2 0:3 / /x rw - ", nil},         // no type
		{"1 2 0:3 / /x rw tmpfs tmpfs rw", nil},
		{"", nil},
		{"1 2 0:3 / /p rw - proc proc rw\n\n1 2 0:4 / /s rw - sysfs sysfs rw\n", []mountLine{{"/p", "proc"}, {"/s", "sysfs"}}},
	} {
		if got := parseMountinfo(c.line); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.line, got, c.want)
		}
	}
}

// A failed host walk is an error at every call, never cached as a walk
// that found nothing: here / is root's, and uid 0 is in the range.
func TestFindHostPathsFailureIsNotCached(t *testing.T) {
	testenv.RequireRoot(t)
	t.Cleanup(func() {
		hostPathsMu.Lock()
		delete(hostPathsCache, [2]int{0, 0})
		hostPathsMu.Unlock()
	})
	for call := 1; call <= 2; call++ {
		if hp, err := findHostPaths(0, 0, nil); err == nil {
			t.Fatalf("call %d: walk of a / uid 0 owns with uid 0 a kernel's: %+v, no error", call, hp)
		}
	}
}
