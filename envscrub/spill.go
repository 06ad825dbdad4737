package envscrub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// spill writes text to dir/name and returns the path. dir is created 0700
// if missing. Every step is resolved inside dir's parent through an
// os.Root, so a kernel that can write its own staging dir cannot redirect
// the daemon's write through a symlinked spill dir or a planted file: the
// directory must be a real directory, and the file is created exclusively
// (O_EXCL, plus O_NOFOLLOW where the platform has it). A failed write
// removes the partial file.
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
	rel := filepath.Join(base, name)
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return "", fmt.Errorf("create spill file: %w", err)
	}
	_, werr := f.WriteString(text)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = root.Remove(rel) // leave no partial file behind
		return "", fmt.Errorf("write spill file: %w", err)
	}
	return filepath.Join(dir, name), nil
}
