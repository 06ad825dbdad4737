package isolate

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultScrubDirs lists the host's world-writable directories a kernel uid
// may have left files in: before a uid is leased again, every entry it
// owns below them is removed (the init step's private tmpfs covers most of
// them for sandboxed kernels; /run/lock and kernels without it are not).
func DefaultScrubDirs() []string {
	return []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue"}
}

// Bounds of one scrub walk: it runs on the spawn path of a kernel whose
// uid was used before, so it must stay cheap however much a tenant left.
const (
	scrubMaxDepth   = 8
	scrubMaxEntries = 200000
)

// errScrubBound: the walk hit a bound, so leftovers may remain.
var errScrubBound = errors.New("scrub walk bound reached")

// scrubUID removes everything uid owns in dirs (never following a
// symlink: every step is relative to an O_NOFOLLOW directory fd) and its
// SysV IPC objects. It only descends into directories uid could have
// written to: world-writable ones, and its own (removed whole). It kills
// nothing. An error means leftovers may remain.
func scrubUID(dirs []string, uid int) error {
	s := scrubber{uid: uint32(uid)}
	var errs []error
	for _, d := range dirs {
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("scrub %s: %w", d, err))
			continue
		}
		if err := s.walk(fd, 0); err != nil {
			errs = append(errs, fmt.Errorf("scrub %s: %w", d, err))
		}
		_ = unix.Close(fd)
	}
	if err := removeIPC(uid); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

type scrubber struct {
	uid     uint32
	entries int
}

// walk removes uid's entries in the directory dirfd and descends into the
// world-writable directories of others.
func (s *scrubber) walk(dirfd, depth int) error {
	names, err := readDirNames(dirfd)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if s.entries++; s.entries > scrubMaxEntries {
			return errScrubBound
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		switch {
		case st.Uid == s.uid:
			if err := s.removeAt(dirfd, name, isDir, depth); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		case isDir && st.Mode&0o002 != 0:
			if err := s.descend(dirfd, name, depth, s.walk); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeAt removes one entry of dirfd; a directory with all it holds.
func (s *scrubber) removeAt(dirfd int, name string, isDir bool, depth int) error {
	if !isDir {
		return ignoreENOENT(unix.Unlinkat(dirfd, name, 0))
	}
	if err := s.descend(dirfd, name, depth, s.empty); err != nil {
		return err
	}
	return ignoreENOENT(unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR))
}

// empty removes everything in the directory dirfd (it belongs to uid).
func (s *scrubber) empty(dirfd, depth int) error {
	names, err := readDirNames(dirfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if s.entries++; s.entries > scrubMaxEntries {
			return errScrubBound
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if err := s.removeAt(dirfd, name, st.Mode&unix.S_IFMT == unix.S_IFDIR, depth); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// descend opens dirfd/name without following a symlink and runs fn in it.
func (s *scrubber) descend(dirfd int, name string, depth int, fn func(int, int) error) error {
	if depth+1 > scrubMaxDepth {
		return errScrubBound
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd, depth+1)
}

func readDirNames(dirfd int) ([]string, error) {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
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
