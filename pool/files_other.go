//go:build !linux

package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/kernpool/kernpool/kernel"
)

// Off Linux a kernel has no mount namespace and runs as the daemon's
// user: its working dir is opened as an os.Root, which keeps every path
// beneath it (a symlink that leads out is refused).

func (a fileArea) root() (*os.Root, error) {
	r, err := os.OpenRoot(a.dir)
	if err != nil || !a.alive() {
		if r != nil {
			_ = r.Close()
		}
		return nil, fmt.Errorf("kernel %q: %w", a.id, ErrNotFound)
	}
	return r, nil
}

// fileErr turns an os error into the files API's sentinels.
func fileErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return ErrNoFile
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %v", ErrFileAccess, err)
	case strings.Contains(err.Error(), "escapes from parent"):
		return badRequest(errors.New("the path leaves the working dir"))
	}
	return err
}

func (a fileArea) open(rel string) (*os.File, int64, error) {
	r, err := a.root()
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	if fi, err := r.Lstat(rel); err != nil || !fi.Mode().IsRegular() {
		if err != nil {
			return nil, 0, fileErr(err)
		}
		return nil, 0, fmt.Errorf("%w: it is a %s", ErrNotRegular, typeOfMode(fi.Mode()))
	}
	f, err := r.Open(rel)
	if err != nil {
		return nil, 0, fileErr(err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, 0, ErrNotRegular
	}
	return f, fi.Size(), nil
}

func (a fileArea) write(ctx context.Context, rel string, body io.Reader) (int64, error) {
	r, err := a.root()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	if d := path.Dir(rel); d != "." {
		if err := r.MkdirAll(d, 0o700); err != nil {
			return 0, fileErr(err)
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := path.Join(path.Dir(rel), ".kernpool-upload-"+hex.EncodeToString(b[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fileErr(err)
	}
	n, err := io.Copy(f, io.LimitReader(body, a.maxBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil && n > a.maxBytes:
		err = fmt.Errorf("%w of %d bytes (files_max_bytes)", ErrTooLarge, a.maxBytes)
	case err == nil && ctx.Err() != nil:
		err = ctx.Err()
	case err == nil:
		err = fileErr(r.Rename(tmp, rel))
	}
	if err != nil {
		_ = r.Remove(tmp)
		return 0, err
	}
	return n, nil
}

func (a fileArea) remove(rel string) error {
	r, err := a.root()
	if err != nil {
		return err
	}
	defer r.Close()
	return fileErr(r.Remove(rel))
}

func (a fileArea) list(dir string, max int) (*FileListing, error) {
	if dir == "" {
		dir = "."
	}
	r, err := a.root()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(dir)
	if err != nil {
		return nil, fileErr(err)
	}
	defer f.Close()
	l := &FileListing{Entries: []FileEntry{}}
	for len(l.Entries) < max {
		ents, err := f.ReadDir(min(1024, max-len(l.Entries)))
		for _, e := range ents {
			fi, ierr := r.Lstat(path.Join(dir, e.Name()))
			if ierr != nil {
				continue
			}
			l.Entries = append(l.Entries, FileEntry{Name: e.Name(), Size: fi.Size(), Type: typeOfMode(fi.Mode()), MTime: fi.ModTime().UTC()})
		}
		if err != nil || len(ents) == 0 {
			break
		}
	}
	if len(l.Entries) >= max {
		more, _ := f.ReadDir(1)
		l.Truncated = len(more) > 0
	}
	slices.SortFunc(l.Entries, func(x, y FileEntry) int { return strings.Compare(x.Name, y.Name) })
	return l, nil
}

func typeOfMode(m fs.FileMode) FileType {
	switch {
	case m.IsRegular():
		return FileRegular
	case m.IsDir():
		return FileDir
	case m&fs.ModeSymlink != 0:
		return FileSymlink
	}
	return FileOther
}

// walk lists the regular files under dir (see the Linux walk).
func (a fileArea) walk(dir string) (map[string]FileEntry, bool, error) {
	out := map[string]FileEntry{}
	r, err := a.root()
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	if _, err := r.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return out, false, nil
	}
	budget, truncated := MaxOutputsScan, false
	err = fs.WalkDir(r.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if budget == 0 {
			truncated = true
			return fs.SkipAll
		}
		budget--
		if len(p) > MaxOutputName {
			truncated = true
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() && strings.Count(strings.TrimPrefix(p, dir+"/"), "/")+1 >= MaxOutputsDepth {
			truncated = true
			return fs.SkipDir
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				out[p] = FileEntry{Name: p, Size: fi.Size(), Type: FileRegular, MTime: fi.ModTime().UTC()}
			}
		}
		return nil
	})
	return out, truncated, fileErr(err)
}

// unreapedOf: off Linux no /proc path is opened by pid.
func unreapedOf(*kernel.Kernel) func() bool { return func() bool { return true } }
