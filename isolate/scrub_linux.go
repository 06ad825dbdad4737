package isolate

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kernpool/kernpool/pool"
	"golang.org/x/sys/unix"
)

// DefaultScrubDirs lists the host's world-writable directories a kernel uid
// may have left files in: before a uid is leased again, every entry it
// owns below them is removed. Under the init step every one of them is a
// private mount of the kernel (hostpaths_linux.go), so the scrub only
// matters for kernels without it.
func DefaultScrubDirs() []string {
	return []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue"}
}

// Bounds of one scrub. It runs on the spawn path of a kernel whose uid was
// used before, so it stays cheap however much a tenant left: it removes at
// most scrubMaxRemoved of the uid's entries and looks at most at
// scrubMaxVisited entries in all. A scrub that stops at a bound is logged
// and counted, never a reason to withhold the uid (what is left is the
// previous tenant's, and the next kernel's private mounts hide it).
const (
	scrubMaxRemoved = 100000
	scrubMaxVisited = 1 << 20
	// scrubHeldFDs directory fds stay open on the way down; a deeper level
	// closes the fd of the level scrubHeldFDs above it, which is reopened
	// through ".." (checked by device and inode) on the way back up. A tree
	// of any depth costs at most this many fds.
	scrubHeldFDs = 64
)

// errScrubBound: the walk stopped at a bound, so leftovers may remain.
var errScrubBound = errors.New("scrub bound reached")

// errScrubMoved: a directory reopened through ".." is not the one left.
var errScrubMoved = errors.New("directory moved during the scrub")

// scrubResult is what one scrub did.
type scrubResult struct {
	Removed, Visited int
}

// scrubUID removes everything uid owns in dirs and its SysV IPC objects.
// Every step is relative to a directory fd opened with O_NOFOLLOW, so no
// symlink is ever followed; it descends only into directories uid could
// have written to (world-writable ones) and into its own, which go whole.
// It kills nothing. An error means leftovers may remain (errScrubBound
// when a bound stopped it).
func scrubUID(dirs []string, uid int) (scrubResult, error) {
	s := scrubber{uid: uint32(uid)}
	var errs []error
	for _, d := range dirs {
		if s.stopped {
			break
		}
		if err := s.scrubRoot(d); err != nil {
			errs = append(errs, fmt.Errorf("scrub %s: %w", d, err))
		}
	}
	if err := removeIPC(uid); err != nil {
		errs = append(errs, err)
	}
	return scrubResult{Removed: s.removed, Visited: s.visited}, errors.Join(errs...)
}

type scrubber struct {
	uid              uint32
	removed, visited int
	stopped          bool // a bound was reached
	buf              []byte
}

// scrubFrame is one directory on the walk's stack.
type scrubFrame struct {
	fd       int    // -1 while closed to bound the fds held
	dev, ino uint64 // identity, checked when reopened through ".."
	name     string // its name in the parent
	own      bool   // uid's: everything in it goes, then it
	resume   int64  // directory offset to continue from when reopened
	ents     []dirent
	eof      bool
}

type dirent struct {
	name string
	off  int64
}

func (s *scrubber) scrubRoot(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return err
	}
	return s.walk(&scrubFrame{fd: fd, dev: st.Dev, ino: st.Ino})
}

// walk runs the scrub from root without recursion: a stack of frames,
// at most scrubHeldFDs of them with an open fd.
func (s *scrubber) walk(root *scrubFrame) error {
	stack := []*scrubFrame{root}
	var errs []error
	defer func() {
		for _, f := range stack {
			if f.fd >= 0 {
				_ = unix.Close(f.fd)
			}
		}
	}()
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		name, err := s.next(top)
		if err != nil {
			errs = append(errs, err)
		}
		if name == "" || err != nil || s.stopped {
			// This directory is done: back to its parent.
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				if err := s.leave(parent, top); err != nil {
					errs = append(errs, err)
					if parent.fd < 0 {
						return errors.Join(errs...) // the path up is lost
					}
				}
			} else {
				_ = unix.Close(top.fd)
				top.fd = -1
			}
			continue
		}
		child, err := s.visit(top, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		if child == nil {
			continue
		}
		stack = append(stack, child)
		if n := len(stack); n > scrubHeldFDs {
			if f := stack[n-1-scrubHeldFDs]; f.fd >= 0 {
				_ = unix.Close(f.fd)
				f.fd, f.ents = -1, nil
			}
		}
	}
	if s.stopped {
		errs = append(errs, errScrubBound)
	}
	return errors.Join(errs...)
}

// visit handles one entry of dir: removes it when it is uid's and not a
// directory; returns the frame to descend into for a directory of uid's
// (to empty and remove) or a world-writable one of another uid's.
func (s *scrubber) visit(dir *scrubFrame, name string) (*scrubFrame, error) {
	if s.visited++; s.visited > scrubMaxVisited {
		s.stopped = true
		return nil, nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, nil // gone meanwhile
	}
	own := dir.own || st.Uid == s.uid
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case own && !isDir:
		if s.removed >= scrubMaxRemoved {
			s.stopped = true
			return nil, nil
		}
		if err := ignoreENOENT(unix.Unlinkat(dir.fd, name, 0)); err != nil {
			return nil, err
		}
		s.removed++
		return nil, nil
	case isDir && (own || st.Mode&0o002 != 0):
		fd, err := unix.Openat(dir.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var got unix.Stat_t
		if err := unix.Fstat(fd, &got); err != nil || got.Dev != st.Dev || got.Ino != st.Ino {
			_ = unix.Close(fd)
			return nil, errScrubMoved
		}
		return &scrubFrame{fd: fd, dev: st.Dev, ino: st.Ino, name: name, own: own}, nil
	}
	return nil, nil
}

// leave returns from child to its parent dir: reopens the parent through
// ".." when its fd was closed, then removes child when it was uid's.
func (s *scrubber) leave(parent, child *scrubFrame) error {
	defer func() { _ = unix.Close(child.fd); child.fd = -1 }()
	if parent.fd < 0 {
		fd, err := unix.Openat(child.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("reopen parent of %s: %w", child.name, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Dev != parent.dev || st.Ino != parent.ino {
			_ = unix.Close(fd)
			return fmt.Errorf("reopen parent of %s: %w", child.name, errScrubMoved)
		}
		if _, err := unix.Seek(fd, parent.resume, 0); err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("reopen parent of %s: %w", child.name, err)
		}
		parent.fd, parent.ents, parent.eof = fd, nil, false
	}
	if !child.own || s.stopped {
		return nil
	}
	err := ignoreENOENT(unix.Unlinkat(parent.fd, child.name, unix.AT_REMOVEDIR))
	if err != nil {
		return fmt.Errorf("%s: %w", child.name, err)
	}
	s.removed++
	return nil
}

// next is the next entry name of dir ("" at its end), read in batches
// straight from getdents so a huge directory never sits in memory whole.
func (s *scrubber) next(dir *scrubFrame) (string, error) {
	for len(dir.ents) == 0 {
		if dir.eof {
			return "", nil
		}
		if s.buf == nil {
			s.buf = make([]byte, 32<<10)
		}
		n, err := unix.Getdents(dir.fd, s.buf)
		if errors.Is(err, unix.ENOENT) {
			n, err = 0, nil // removed while open: a dead dir holds nothing
		}
		if err != nil {
			return "", err
		}
		if n == 0 {
			dir.eof = true
			return "", nil
		}
		dir.ents = parseDirents(s.buf[:n], dir.ents[:0])
	}
	e := dir.ents[0]
	dir.ents = dir.ents[1:]
	dir.resume = e.off
	return e.name, nil
}

// parseDirents decodes struct linux_dirent64 records (ino u64, off s64,
// reclen u16, type u8, name NUL-terminated), skipping "." and "..".
func parseDirents(b []byte, out []dirent) []dirent {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		off := int64(binary.NativeEndian.Uint64(b[8:16]))
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if n := string(name); n != "." && n != ".." {
			out = append(out, dirent{name: n, off: off})
		}
		b = b[reclen:]
	}
	return out
}

func ignoreENOENT(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// removeIPC removes the SysV shared memory segments, message queues and
// semaphore sets uid owns or created (as /proc/sysvipc lists them in the
// daemon's IPC namespace).
func removeIPC(uid int) error {
	var errs []error
	for _, k := range []struct {
		file string
		rm   func(id int) error
	}{
		{"shm", func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
		{"msg", func(id int) error {
			_, _, e := unix.Syscall(unix.SYS_MSGCTL, uintptr(id), unix.IPC_RMID, 0)
			return errnoErr(e)
		}},
		{"sem", func(id int) error {
			_, _, e := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, unix.IPC_RMID, 0, 0, 0)
			return errnoErr(e)
		}},
	} {
		ids, err := ipcIDs("/proc/sysvipc/"+k.file, uid)
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range ids {
			if err := k.rm(id); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
				errs = append(errs, fmt.Errorf("remove sysv %s %d: %w", k.file, id, err))
			}
		}
	}
	return errors.Join(errs...)
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// ipcIDs reads the ids of the objects uid owns or created from a
// /proc/sysvipc table (columns named by its header line).
func ipcIDs(path string, uid int) ([]int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil, sc.Err()
	}
	col := map[string]int{}
	for i, h := range strings.Fields(sc.Text()) {
		col[h] = i
	}
	idCol, uidCol, cuidCol := col["shmid"], col["uid"], col["cuid"]
	for _, n := range []string{"msqid", "semid"} {
		if i, ok := col[n]; ok {
			idCol = i
		}
	}
	var ids []int
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) <= max(idCol, uidCol, cuidCol) {
			continue
		}
		if f[uidCol] == strconv.Itoa(uid) || f[cuidCol] == strconv.Itoa(uid) {
			if id, err := strconv.Atoi(f[idCol]); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return ids, sc.Err()
}

// scrubStats counts the scrubs of one isolator, for SandboxStats.
type scrubStats struct {
	runs, removed, bounded, failed atomic.Int64
}

func (s *scrubStats) record(res scrubResult, err error) {
	s.runs.Add(1)
	s.removed.Add(int64(res.Removed))
	if errors.Is(err, errScrubBound) {
		s.bounded.Add(1)
	}
	if scrubFailed(err) {
		s.failed.Add(1)
	}
}

// scrubFailed says whether err holds an error other than the bound.
func scrubFailed(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return slices.ContainsFunc(j.Unwrap(), scrubFailed)
	}
	return err != nil && !errors.Is(err, errScrubBound)
}

// SandboxStats reports the scrubs so far and the host-path walk done at
// start (pool.SandboxStatser: the daemon's metrics).
func (i *Isolator) SandboxStats() pool.SandboxStats {
	return pool.SandboxStats{
		UIDScrubs: i.scrubs.runs.Load(), ScrubRemoved: i.scrubs.removed.Load(),
		ScrubBounded: i.scrubs.bounded.Load(), ScrubErrors: i.scrubs.failed.Load(),
		HostPathsPrivate: len(i.hostPaths.Private), HostPathsReadOnly: len(i.hostPaths.ReadOnly),
		HostPathDirs: i.hostPaths.Dirs, HostPathWalk: i.hostPaths.Took,
	}
}

// TaintedUIDs is how many kernel uids are retired now (their processes
// may still run); they come back once none does.
func (i *Isolator) TaintedUIDs() int {
	if i.uids == nil {
		return 0
	}
	return i.uids.taintedCount()
}
