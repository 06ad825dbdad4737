package isolate

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// hostPaths are the host directories a kernel uid could write, found by
// walking every filesystem a kernel can reach (hostWritable). The init
// step mounts a private tmpfs on each Private one (sticky world-writable
// scratch dirs: /tmp, /var/tmp, /dev/shm, /run/lock, ...) and binds each
// ReadOnly one (writable by a kernel uid, but not scratch) read-only, so
// nothing a tenant writes outlives its kernel or spends the host's inodes.
type hostPaths struct {
	Private, ReadOnly []string
	Dirs              int           // directories looked at
	Took              time.Duration // how long the walk took
}

// pseudoFS are filesystem types the walk does not enter: the init mounts
// its own proc, cgroup, devpts and mqueue; the others hold no directory a
// kernel uid can create files in.
var pseudoFS = map[string]bool{
	"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true, "mqueue": true,
	"debugfs": true, "tracefs": true, "securityfs": true, "pstore": true, "bpf": true, "configfs": true,
	"fusectl": true, "binfmt_misc": true, "efivarfs": true, "nsfs": true, "rpc_pipefs": true,
	"selinuxfs": true, "autofs": true, "hugetlbfs": true,
}

// stateLockName marks a kernpool state dir (pool/daemon holds its lock).
const stateLockName = ".kernpool.lock"

// hostWalkMaxDirs bounds the walk: a host with more reachable directories
// than this refuses to start rather than run kernels with paths unchecked.
const hostWalkMaxDirs = 4 << 20

var (
	hostPathsMu    sync.Mutex
	hostPathsCache = map[[2]int]hostPaths{}
)

// findHostPaths is hostWritable, once per process and uid range: the
// daemon walks the host at start only.
func findHostPaths(first, last int, skip []string) (hostPaths, error) {
	hostPathsMu.Lock()
	defer hostPathsMu.Unlock()
	if hp, ok := hostPathsCache[[2]int{first, last}]; ok {
		return hp, nil
	}
	hp, err := hostWritable("/", first, last, skip)
	if err != nil {
		return hp, err
	}
	hostPathsCache[[2]int{first, last}] = hp
	return hp, nil
}

// hostWritable walks every directory a kernel uid (any of first..last, or
// an "other") can reach from root (the daemon's: /), without following symlinks (every step is
// an openat with O_NOFOLLOW) and without entering pseudo filesystems or
// skip, and sorts the directories it could write into Private (sticky and
// world-writable: scratch) and ReadOnly. It reads directories with
// getdents and stats only subdirectories: it runs at every daemon start.
func hostWritable(root string, first, last int, skip []string) (hostPaths, error) {
	return hostWalk{first: first, last: last, skip: skip, maxDirs: hostWalkMaxDirs}.walk(root)
}

// walk is hostWritable with w's bound (tests walk small trees to theirs).
func (w hostWalk) walk(root string) (hostPaths, error) {
	start := time.Now()
	pseudo, err := pseudoMounts()
	if err != nil {
		return hostPaths{}, err
	}
	w.pseudo, w.buf = pseudo, make([]byte, 64<<10)
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return hostPaths{}, fmt.Errorf("find host paths: %w", err)
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err == nil {
		if w.writable(&st) {
			err = fmt.Errorf("%s is writable by kernel uids or theirs (mode %o)", root, st.Mode&0o7777)
		} else {
			err = w.dir(fd, root)
		}
	}
	_ = unix.Close(fd)
	w.hp.Took = time.Since(start)
	if err != nil {
		return w.hp, fmt.Errorf("find host paths kernels can write: %w", err)
	}
	sort.Strings(w.hp.Private)
	sort.Strings(w.hp.ReadOnly)
	return w.hp, nil
}

type hostWalk struct {
	first, last int
	maxDirs     int // directories looked at before the walk refuses
	pseudo      map[string]bool
	skip        []string
	buf         []byte
	hp          hostPaths
}

func (w *hostWalk) inRange(id uint32) bool { return int(id) >= w.first && int(id) <= w.last }

// writable: world-writable, writable by a range gid, or a range uid's
// whatever its mode (its owner can chmod it writable).
func (w *hostWalk) writable(st *unix.Stat_t) bool {
	m := st.Mode
	return m&0o002 != 0 || w.inRange(st.Uid) || w.inRange(st.Gid) && m&0o020 != 0
}

// checkUIDLockDir refuses a uid lock dir kernel uids could write (the
// walk's rule: world-writable, writable by a range gid, or a range uid's):
// a kernel could unlink the lock files,
// and another daemon lease a uid this one leases, or plant them and hold
// uids from every daemon. Stat follows a symlink: the lock files are
// opened through it.
func checkUIDLockDir(dir string, first, last int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("uid lock dir: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: uid lock dir %s is not a directory", ErrBadConfig, dir)
	}
	if (&hostWalk{first: first, last: last}).writable(&st) {
		return fmt.Errorf("%w: uid lock dir %s is writable by kernel uids or theirs (mode %o, owner %d:%d): make it root's, mode 0700",
			ErrBadConfig, dir, st.Mode&0o7777, st.Uid, st.Gid)
	}
	return nil
}

func (w *hostWalk) searchable(st *unix.Stat_t) bool {
	m := st.Mode
	return m&0o001 != 0 || w.inRange(st.Uid) && m&0o100 != 0 || w.inRange(st.Gid) && m&0o010 != 0
}

// dir looks at every subdirectory of the open directory fd (path).
func (w *hostWalk) dir(fd int, path string) error {
	var subdirs []string
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err != nil {
			return nil // unreadable even for root (a FUSE mount): nothing to learn
		}
		if n == 0 {
			break
		}
		subdirs = direntDirs(w.buf[:n], subdirs)
	}
	for _, name := range subdirs {
		if err := w.sub(fd, path, name); err != nil {
			return err
		}
	}
	return nil
}

// direntDirs appends the names of getdents64 records b that may be
// directories (DT_DIR, or DT_UNKNOWN: a filesystem without d_type) to out,
// "." and ".." aside. A name ends at its NUL; a record too short or longer
// than what is left ends the parse.
func direntDirs(b []byte, out []string) []string {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		typ, name := b[18], b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && string(name) != "." && string(name) != ".." {
			out = append(out, string(name))
		}
		b = b[reclen:]
	}
	return out
}

func (w *hostWalk) sub(parent int, path, name string) error {
	p := filepath.Join(path, name)
	if w.pseudo[p] || slices.Contains(w.skip, p) {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	if w.hp.Dirs++; w.hp.Dirs > w.maxDirs {
		return fmt.Errorf("more than %d directories reachable", w.maxDirs)
	}
	if w.writable(&st) {
		if st.Mode&0o1002 == 0o1002 {
			w.hp.Private = append(w.hp.Private, p)
			return nil // hidden whole by the tmpfs
		}
		w.hp.ReadOnly = append(w.hp.ReadOnly, p)
	}
	if !w.searchable(&st) {
		return nil // a kernel cannot reach below
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // gone meanwhile
	}
	defer unix.Close(fd)
	if st.Mode&0o777 == 0o711 && unix.Faccessat(fd, stateLockName, unix.F_OK, unix.AT_SYMLINK_NOFOLLOW) == nil {
		// Another daemon's state dir: its kernels' staging dirs (owned by
		// range uids, here now and gone soon) are tmpfs of their own.
		return nil
	}
	return w.dir(fd, p)
}

// pseudoMounts are the mount points of pseudo filesystems (pseudoFS).
func pseudoMounts() (map[string]bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("find host paths: %w", err)
	}
	out := map[string]bool{}
	for _, m := range parseMountinfo(string(b)) {
		if pseudoFS[m.fstype] {
			out[m.point] = true
		}
	}
	return out, nil
}

type mountLine struct{ point, fstype string }

// parseMountinfo reads mount points (octal escapes undone) and types.
func parseMountinfo(s string) []mountLine {
	var out []mountLine
	for _, line := range strings.Split(s, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 1 {
			continue
		}
		out = append(out, mountLine{point: unescapeOctal(a[4]), fstype: b[0]})
	}
	return out
}

func unescapeOctal(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
