package envscrub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Spill file names: spillPrefix + cell number (%06d) + spillSuffix.
const (
	spillPrefix = "cell_"
	spillSuffix = "_stdout.txt"
)

// SpillName is the name of cell's spill file inside its spill directory.
func SpillName(cell int) string { return fmt.Sprintf("%s%06d%s", spillPrefix, cell, spillSuffix) }

// spill writes text to dir/name and returns the path. dir is created 0700
// if missing; the daemon normally
// creates it (<state>/spill/<kernel id>, which no kernel can write).
// Every step is resolved inside dir's parent through an os.Root, so no
// symlink can redirect the write: the directory must be a real directory,
// and the file is created exclusively (O_EXCL, plus O_NOFOLLOW where the
// platform has it), mode 0640 so that the kernel's group (set by a setgid
// spill dir) can read it. A failed write removes the partial file.
func spill(dir, name, text string) (string, error) {
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	root, err := os.OpenRoot(parent)
	if err != nil {
		return "", fmt.Errorf("open spill parent: %w", err)
	}
	defer root.Close()
	if err := root.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create spill dir: %w", err)
	}
	fi, err := root.Lstat(base)
	if err != nil {
		return "", fmt.Errorf("stat spill dir: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("spill dir %s is not a directory", dir)
	}
	sub, err := root.OpenRoot(base)
	if err != nil {
		return "", fmt.Errorf("open spill dir: %w", err)
	}
	defer sub.Close()
	f, err := sub.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o640)
	if err != nil {
		return "", fmt.Errorf("create spill file: %w", err)
	}
	_, werr := f.WriteString(text)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = sub.Remove(name) // leave no partial file behind
		return "", fmt.Errorf("write spill file: %w", err)
	}
	return filepath.Join(dir, name), nil
}

// enforceQuota removes the oldest spill files of dir (lowest cell number
// first) until the spill files left hold at most quota bytes; keep is
// never removed. Like spill, it works inside an os.Root of dir.
func enforceQuota(dirPath, keep string, quota int64) error {
	dir, err := os.OpenRoot(dirPath)
	if err != nil {
		return fmt.Errorf("open spill dir: %w", err)
	}
	defer dir.Close()
	d, err := dir.Open(".")
	if err != nil {
		return fmt.Errorf("list spill dir: %w", err)
	}
	entries, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("list spill dir: %w", err)
	}
	type file struct {
		name string
		size int64
	}
	var files []file
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), spillPrefix) || !strings.HasSuffix(e.Name(), spillSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files = append(files, file{e.Name(), info.Size()})
		total += info.Size()
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	for _, f := range files {
		if total <= quota {
			break
		}
		if f.name == keep {
			continue
		}
		if err := dir.Remove(f.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove old spill file: %w", err)
		}
		total -= f.size
	}
	return nil
}
