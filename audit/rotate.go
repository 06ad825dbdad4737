package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// fileMode keeps the audit trail (owners, code hashes) from other users.
const fileMode = 0o600

// rotator is an append-only file that rotates by size: PATH becomes
// PATH.1, PATH.1 becomes PATH.2, ..., PATH.keep is removed. Used by the
// writer goroutine only.
type rotator struct {
	path    string
	maxSize int64
	keep    int
	f       *os.File
	size    int64
}

func openRotator(path string, maxSize int64, keep int) (*rotator, error) {
	r := &rotator{path: path, maxSize: maxSize, keep: keep}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotator) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return fmt.Errorf("%s is not a regular file", r.path)
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// writeLines appends lines, one write per file: lines that would take a
// non-empty file past maxSize go to the next file after a rotation. A
// rotation that fails keeps the lines in the current file (rotErr says
// why; nothing is lost); err means the last lost lines were not written.
// A file that failed is reopened on the next write.
func (r *rotator) writeLines(lines [][]byte) (rotErr error, lost int, err error) {
	var chunk []byte
	size, n := r.size, 0
	for i, b := range lines {
		if size > 0 && size+int64(len(b)) > r.maxSize {
			if werr := r.writeChunk(chunk); werr != nil {
				lost, err = lost+n, werr
			}
			chunk, n = chunk[:0], 0
			if rerr := r.rotate(); rerr != nil {
				rotErr = fmt.Errorf("rotate: %w", rerr)
			}
			size = r.size
		}
		chunk = append(chunk, lines[i]...)
		size += int64(len(b))
		n++
	}
	if werr := r.writeChunk(chunk); werr != nil {
		lost, err = lost+n, werr
	}
	return rotErr, lost, err
}

// writeChunk writes b to the current file, opening it when needed.
func (r *rotator) writeChunk(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if r.f == nil {
		if err := r.open(); err != nil {
			return err
		}
	}
	n, err := r.f.Write(b)
	r.size += int64(n)
	if err != nil {
		_ = r.f.Close()
		r.f = nil
	}
	return err
}

func (r *rotator) rotate() error {
	if err := r.close(); err != nil {
		return err
	}
	r.size = 0
	_ = os.Remove(fmt.Sprintf("%s.%d", r.path, r.keep))
	for i := r.keep - 1; i >= 1; i-- {
		err := os.Rename(fmt.Sprintf("%s.%d", r.path, i), fmt.Sprintf("%s.%d", r.path, i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(r.path, r.path+".1"); err != nil {
		return err
	}
	return r.open()
}

func (r *rotator) close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
