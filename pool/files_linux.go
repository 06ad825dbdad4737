package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/kernel"
)

// beneath is how every path under the working dir is resolved: inside
// it, through no symlink and no /proc magic link, in one syscall (no
// window between a check and a use for the tenant to swap a component).
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// asKernel runs f on an OS thread of its own whose filesystem credentials
// are the kernel's (fsuid and fsgid its uid, no supplementary groups):
// permission checks are the kernel's, what it creates is the kernel's, and
// the capabilities that bypass them are dropped with the fsuid. The thread
// is never unlocked, so it ends with the goroutine and nothing else ever
// runs with its credentials (the runtime starts new threads from a clean
// one, not from a locked thread).
func (a fileArea) asKernel(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if a.uid >= 0 && os.Geteuid() == 0 {
			if err := setFSCreds(a.uid); err != nil {
				errc <- err
				return
			}
		}
		errc <- f()
	}()
	return <-errc
}

// setFSCreds sets this thread's (only this thread's: raw syscalls, not
// the runtime's all-threads ones) supplementary groups, fsgid and fsuid,
// and checks that they hold: failing closed if the kernel refused.
func setFSCreds(uid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("drop groups: %w", e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(uid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
	// An invalid id changes nothing and returns the current one.
	g, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, 0xffffffff, 0, 0)
	u, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, 0xffffffff, 0, 0)
	if int(u) != uid || int(g) != uid {
		return fmt.Errorf("set filesystem ids to %d: got uid %d gid %d", uid, u, g)
	}
	return nil
}

// inArea runs f as the kernel (asKernel) with wd, the working dir as the
// kernel sees it: under a mount namespace, resolved from the kernel's own
// root (/proc/<init>/root, opened while the daemon is still root, and
// only while the kernel, the daemon's unreaped child, holds that pid), so
// a private /tmp or a read-only bind is what the daemon sees too.
func (a fileArea) inArea(f func(wd int) error) error {
	root := -1
	if a.mountNS {
		fd, err := unix.Open("/proc/"+strconv.Itoa(a.pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil || !a.alive() || !a.unreaped() {
			if err == nil {
				_ = unix.Close(fd)
			}
			return fmt.Errorf("kernel %q: %w", a.id, ErrNotFound)
		}
		defer unix.Close(fd)
		root = fd
	}
	return a.asKernel(func() error {
		var wd int
		var err error
		if root >= 0 {
			rel := strings.TrimPrefix(a.dir, "/")
			if rel == "" {
				rel = "."
			}
			wd, err = unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
		} else {
			wd, err = unix.Open(a.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return fmt.Errorf("open the working dir: %w", fileErr(err))
		}
		defer unix.Close(wd)
		return f(wd)
	})
}

// openBeneath opens rel under dir (beneath).
func openBeneath(dir int, rel string, flags int, mode uint32) (int, error) {
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: beneath})
	if err != nil {
		return -1, fileErr(err)
	}
	return fd, nil
}

// fileErr turns an errno into the files API's sentinels.
func fileErr(err error) error {
	var e unix.Errno
	if !errors.As(err, &e) {
		return err
	}
	switch e {
	case unix.ENOENT:
		return ErrNoFile
	case unix.ELOOP:
		return fmt.Errorf("%w: the path goes through a symlink, which is never followed", ErrNotRegular)
	case unix.EXDEV:
		return badRequest(errors.New("the path leaves the working dir"))
	case unix.ENOTDIR:
		return fmt.Errorf("%w: a component of the path is not a directory", ErrNoFile)
	case unix.EISDIR:
		return fmt.Errorf("%w: it is a directory", ErrNotRegular)
	case unix.ENOTEMPTY:
		return badRequest(errors.New("the directory is not empty"))
	case unix.EACCES, unix.EPERM, unix.EROFS:
		return fmt.Errorf("%w: %v", ErrFileAccess, e)
	case unix.ENOSPC, unix.EDQUOT:
		return ErrNoSpace
	case unix.ENAMETOOLONG:
		return badRequest(errors.New("the path is too long"))
	}
	return err
}

// open opens rel for reading: a regular file only (O_NONBLOCK so that a
// planted fifo cannot hang the open).
func (a fileArea) open(rel string) (*os.File, int64, error) {
	var f *os.File
	var size int64
	err := a.inArea(func(wd int) error {
		fd, err := openBeneath(wd, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			_ = unix.Close(fd)
			return fmt.Errorf("%w: it is a %s", ErrNotRegular, typeOf(st.Mode))
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			_ = unix.Close(fd)
			return err
		}
		f, size = os.NewFile(uintptr(fd), rel), st.Size
		return nil
	})
	return f, size, err
}

// write streams r into a new file beside rel, then renames it onto rel.
func (a fileArea) write(ctx context.Context, rel string, r io.Reader) (int64, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := ".kernpool-upload-" + hex.EncodeToString(b[:])
	base := path.Base(rel)
	var parent int
	var f *os.File
	err := a.inArea(func(wd int) error {
		var err error
		if parent, err = mkdirBeneath(wd, path.Dir(rel)); err != nil {
			return err
		}
		fd, err := openBeneath(parent, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			_ = unix.Close(parent)
			return err
		}
		f = os.NewFile(uintptr(fd), tmp)
		return nil
	})
	if err != nil {
		return 0, err
	}
	defer unix.Close(parent)
	n, err := copyCapped(ctx, f, r, a.maxBytes)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fileErr(cerr)
	}
	if err == nil {
		err = a.asKernel(func() error { return fileErr(unix.Renameat(parent, tmp, parent, base)) })
	}
	if err != nil {
		_ = a.asKernel(func() error { return unix.Unlinkat(parent, tmp, 0) })
		return 0, err
	}
	return n, nil
}

// copyCapped copies r to f, refusing more than max bytes.
func copyCapped(ctx context.Context, f *os.File, r io.Reader, max int64) (int64, error) {
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	switch {
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			return n, fileErr(pe.Err)
		}
		return n, fmt.Errorf("read the body: %w", err)
	case n > max:
		return n, fmt.Errorf("%w of %d bytes (files_max_bytes)", ErrTooLarge, max)
	case ctx.Err() != nil:
		return n, ctx.Err()
	}
	return n, nil
}

// mkdirBeneath creates dir's components under wd (0700, as the kernel)
// and returns an O_PATH fd of dir; a symlink on the way is refused.
func mkdirBeneath(wd int, dir string) (int, error) {
	cur, err := unix.Dup(wd)
	if err != nil {
		return -1, err
	}
	if dir == "." {
		return cur, nil
	}
	for _, c := range strings.Split(dir, "/") {
		if err := unix.Mkdirat(cur, c, 0o700); err != nil && err != unix.EEXIST {
			_ = unix.Close(cur)
			return -1, fileErr(err)
		}
		next, err := openBeneath(cur, c, unix.O_PATH|unix.O_DIRECTORY, 0)
		_ = unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// remove unlinks rel, or removes it if it is an empty dir.
func (a fileArea) remove(rel string) error {
	return a.inArea(func(wd int) error {
		parent, err := openBeneath(wd, path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(parent)
		base := path.Base(rel)
		err = unix.Unlinkat(parent, base, 0)
		if err == unix.EISDIR {
			err = unix.Unlinkat(parent, base, unix.AT_REMOVEDIR)
		}
		return fileErr(err)
	})
}

// list reads at most max entries of dir, without following any symlink.
func (a fileArea) list(dir string, max int) (*FileListing, error) {
	if dir == "" {
		dir = "."
	}
	var fd int
	err := a.inArea(func(wd int) error {
		var err error
		fd, err = openBeneath(wd, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	return readEntries(f, fd, max)
}

// readEntries reads names in chunks (never the whole dir) and stats each
// relative to the dir's fd, not following symlinks.
func readEntries(f *os.File, fd, max int) (*FileListing, error) {
	l := &FileListing{Entries: []FileEntry{}}
	for len(l.Entries) < max {
		names, err := f.Readdirnames(min(1024, max-len(l.Entries)))
		for _, n := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue // removed since
			}
			l.Entries = append(l.Entries, entryOf(n, &st))
		}
		if err == io.EOF || len(names) == 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read dir: %w", err)
		}
	}
	if len(l.Entries) >= max {
		more, _ := f.Readdirnames(1)
		l.Truncated = len(more) > 0
	}
	slices.SortFunc(l.Entries, func(x, y FileEntry) int { return strings.Compare(x.Name, y.Name) })
	return l, nil
}

func entryOf(name string, st *unix.Stat_t) FileEntry {
	return FileEntry{Name: name, Size: st.Size, Type: typeOf(st.Mode), MTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC()}
}

func typeOf(mode uint32) FileType {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return FileRegular
	case unix.S_IFDIR:
		return FileDir
	case unix.S_IFLNK:
		return FileSymlink
	}
	return FileOther
}

// walk lists the regular files under dir (paths relative to the working
// dir), visiting at most MaxOutputsScan entries and MaxOutputsDepth
// levels, never through a symlink. A dir that does not exist is empty.
func (a fileArea) walk(dir string) (map[string]FileEntry, bool, error) {
	out := map[string]FileEntry{}
	truncated := false
	err := a.inArea(func(wd int) error {
		fd, err := openBeneath(wd, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, ErrNoFile) {
			return nil
		}
		if err != nil {
			return err
		}
		budget := MaxOutputsScan
		truncated = walkFD(fd, dir, 0, &budget, out)
		return nil
	})
	return out, truncated, err
}

// walkFD reads dir fd (closing it) into out; it reports whether a bound
// cut the walk short.
func walkFD(fd int, prefix string, depth int, budget *int, out map[string]FileEntry) (truncated bool) {
	f := os.NewFile(uintptr(fd), prefix)
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if *budget == 0 {
				return true
			}
			*budget--
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			name := path.Join(prefix, n)
			if len(name) > MaxOutputName {
				// Never listed, so never held (nor anything below it).
				truncated = true
				continue
			}
			switch typeOf(st.Mode) {
			case FileRegular:
				out[name] = entryOf(name, &st)
			case FileDir:
				if depth+1 >= MaxOutputsDepth {
					truncated = true
					continue
				}
				sub, err := openBeneath(fd, n, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err == nil {
					truncated = walkFD(sub, name, depth+1, budget, out) || truncated
				}
			}
		}
		if err != nil || len(names) == 0 {
			return truncated
		}
	}
}

// unreapedOf is k.Unreaped (Linux: the pid is checked through a pidfd).
func unreapedOf(k *kernel.Kernel) func() bool { return k.Unreaped }
