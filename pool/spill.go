package pool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Spill files live under <StateDir>/spill/<kernel id>/, never inside the
// kernel's staging dir (which the kernel's uid owns and could swap for a
// symlink). The spill root is the daemon's (0711: kernels may pass, not
// list); each kernel's dir is the daemon's too, 0750 with the setgid bit
// and the kernel's group when the kernel runs as another uid, so its files
// (0640) are readable, but not writable, by the kernel that produced them.
const (
	spillDirName  = "spill"
	spillRootMode = 0o711
	spillDirMode  = 0o750 | fs.ModeSetgid
	ownSpillMode  = 0o700 // the kernel runs as the daemon's uid
)

// spillRoot is <StateDir>/spill.
func (p *Pool) spillRoot() string { return filepath.Join(p.cfg.StateDir, spillDirName) }

// spillDir is the spill dir of kernel id.
func (p *Pool) spillDir(id string) string { return filepath.Join(p.spillRoot(), id) }

// prepareSpillRoot creates the spill root and removes what a previous
// daemon left in it: no kernel is alive yet, so every entry is stale.
func (p *Pool) prepareSpillRoot() error {
	root := p.spillRoot()
	if err := os.MkdirAll(root, spillRootMode); err != nil {
		return fmt.Errorf("create spill root: %w", err)
	}
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("spill root %s is not a directory: %w", root, errors.Join(err, ErrBadRequest))
	}
	if err := os.Chmod(root, spillRootMode); err != nil {
		return fmt.Errorf("chmod spill root: %w", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("list spill root: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			p.log.Warn("stale spill dir not removed", "name", e.Name(), "error", err)
		}
	}
	return nil
}

// makeSpillDir creates kernel id's spill dir for a kernel running as uid
// (-1: the daemon's own), group-readable by the kernel's gid (isolate
// gives each kernel a gid equal to its uid).
func (p *Pool) makeSpillDir(id string, uid int) error {
	dir := p.spillDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create spill dir: %w", err)
	}
	if uid < 0 || uid == os.Getuid() {
		return nil
	}
	if err := os.Lchown(dir, os.Getuid(), uid); err != nil {
		return fmt.Errorf("chown spill dir: %w", err)
	}
	if err := os.Chmod(dir, spillDirMode); err != nil {
		return fmt.Errorf("chmod spill dir: %w", err)
	}
	return nil
}

// removeSpillDir removes kernel id's spills (teardown).
func (p *Pool) removeSpillDir(id string) {
	if err := os.RemoveAll(p.spillDir(id)); err != nil {
		p.log.Warn("spill dir not removed", "id", id, "error", err)
	}
}

// OpenSpill opens the spill file name of the live kernel id for reading.
// name must be a plain file name; the file is opened inside the kernel's
// spill dir without following any symlink, and must be a regular file.
// ErrNotFound when the kernel or the file does not exist, ErrBadRequest
// for a name that is not a plain file name.
func (p *Pool) OpenSpill(id, name string) (*os.File, error) {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("spill name %q is not a plain file name: %w", name, ErrBadRequest)
	}
	p.mu.Lock()
	_, live := p.byID[id]
	p.mu.Unlock()
	if !live {
		return nil, fmt.Errorf("spill of kernel %q: %w", id, ErrNotFound)
	}
	root, err := os.OpenRoot(p.spillDir(id))
	if err != nil {
		return nil, fmt.Errorf("spill of kernel %q: %w", id, ErrNotFound)
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("spill %s of kernel %s: %w", name, id, ErrNotFound)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("spill %s of kernel %s is not a regular file: %w", name, id, ErrNotFound)
	}
	return f, nil
}
