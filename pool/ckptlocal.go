package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// localStore is the default CheckpointStore: one file per generation,
// <dir>/<owner hash>/<key hash>.<generation>.ckpt (dirs 0700, files
// 0600), written to a temporary name and renamed into place, so a reader
// sees a whole generation or none. One daemon owns a state dir (its
// lock), so the mutex is what makes Put's compare-and-rename atomic.
type localStore struct {
	dir string
	mu  sync.Mutex
	// createTemp is os.CreateTemp; a test replaces it to remove the
	// owner dir first, as a sweep may.
	createTemp func(dir, pattern string) (*os.File, error)
	// maxList is MaxCheckpointList; a test lowers it to list at and past
	// the bound without writing 100,000 files.
	maxList int
}

// ckptFile matches a generation's file name. A file without a
// generation is what daemons before generations wrote: generation 0.
var ckptFile = regexp.MustCompile(`^([0-9a-f]{64})(?:\.([0-9]{1,20}))?\.ckpt$`)

// NewLocalCheckpointStore is the local store over dir (created 0700 when
// missing). The pool makes one under <StateDir>/checkpoints when
// CheckpointConfig.Store is nil; one daemon at a time may use a dir.
func NewLocalCheckpointStore(dir string) (CheckpointStore, error) {
	return newLocalStore(dir)
}

// newLocalStore creates (or checks) dir and removes temporary files a
// previous daemon left behind.
func newLocalStore(dir string) (*localStore, error) {
	if err := os.MkdirAll(dir, ckptDirMode); err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint dir %s is not a directory: %w", dir, errors.Join(err, ErrBadRequest))
	}
	if err := os.Chmod(dir, ckptDirMode); err != nil {
		return nil, fmt.Errorf("chmod checkpoint dir: %w", err)
	}
	owners, _ := os.ReadDir(dir)
	for _, o := range owners {
		files, _ := os.ReadDir(filepath.Join(dir, o.Name()))
		for _, f := range files {
			if strings.HasPrefix(f.Name(), ".tmp-") {
				_ = os.Remove(filepath.Join(dir, o.Name(), f.Name()))
			}
		}
	}
	return &localStore{dir: dir, createTemp: os.CreateTemp, maxList: MaxCheckpointList}, nil
}

func (l *localStore) Describe() string { return "local dir " + l.dir }

// generations lists name's stored generations, newest last.
func (l *localStore) generations(name string) []uint64 {
	owner, keyHash, _ := strings.Cut(name, "/")
	entries, _ := os.ReadDir(filepath.Join(l.dir, owner))
	var gens []uint64
	for _, e := range entries {
		m := ckptFile.FindStringSubmatch(e.Name())
		if m == nil || m[1] != keyHash {
			continue
		}
		g, err := strconv.ParseUint(cmp.Or(m[2], "0"), 10, 64)
		if err == nil {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens
}

func (l *localStore) path(name string, gen uint64) string {
	owner, keyHash, _ := strings.Cut(name, "/")
	if gen == 0 {
		return filepath.Join(l.dir, owner, keyHash+ckptExt)
	}
	return filepath.Join(l.dir, owner, keyHash+"."+strconv.FormatUint(gen, 10)+ckptExt)
}

func (l *localStore) Put(_ context.Context, name string, gen uint64, body io.Reader, size int64) error {
	if !CheckpointNameValid(name) || gen == 0 {
		return fmt.Errorf("checkpoint put: %w", ErrCheckpointName)
	}
	owner, _, _ := strings.Cut(name, "/")
	dir := filepath.Join(l.dir, owner)
	tmp, err := l.spool(dir, body, size)
	if err != nil {
		return fmt.Errorf("checkpoint put: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }() // gone after the rename anyway
	l.mu.Lock()
	defer l.mu.Unlock()
	gens := l.generations(name)
	if len(gens) > 0 && gens[len(gens)-1] >= gen {
		return fmt.Errorf("checkpoint put: generation %d, stored %d: %w", gen, gens[len(gens)-1], ErrStaleGeneration)
	}
	if err := os.Rename(tmp, l.path(name, gen)); err != nil {
		return fmt.Errorf("checkpoint put: %w", err)
	}
	for _, g := range gens {
		_ = os.Remove(l.path(name, g))
	}
	return nil
}

// spool brings body into a temporary file of dir: a file the pool wrote
// in dir already is used as it is (no copy), anything else is copied,
// bounded by size.
func (l *localStore) spool(dir string, body io.Reader, size int64) (string, error) {
	// Windows cannot rename a file its caller still holds open: copy there.
	if f, ok := body.(*os.File); ok && runtime.GOOS != "windows" && filepath.Dir(f.Name()) == dir && strings.HasPrefix(filepath.Base(f.Name()), ".tmp-") {
		if fi, err := f.Stat(); err == nil && fi.Size() == size {
			return f.Name(), nil
		}
	}
	f, err := l.createTemp(dir, ".tmp-*") // 0600, O_EXCL
	for try := 0; errors.Is(err, fs.ErrNotExist) && try < 3; try++ {
		// No owner dir yet, or a sweep removed it while it was empty.
		if err = os.Mkdir(dir, ckptDirMode); err == nil || errors.Is(err, fs.ErrExist) {
			f, err = l.createTemp(dir, ".tmp-*")
		}
	}
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, io.LimitReader(body, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("body of %d bytes, %d announced", n, size)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func (l *localStore) Get(_ context.Context, name string) (CheckpointObject, CheckpointEntry, error) {
	if !CheckpointNameValid(name) {
		return nil, CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", ErrCheckpointName)
	}
	l.mu.Lock()
	gens := l.generations(name)
	l.mu.Unlock()
	if len(gens) == 0 {
		return nil, CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", ErrCheckpointNotFound)
	}
	gen := gens[len(gens)-1]
	f, err := os.OpenFile(l.path(name, gen), os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", ErrCheckpointNotFound)
	}
	if err != nil {
		return nil, CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, CheckpointEntry{}, fmt.Errorf("checkpoint get: %s is not a regular file: %w", filepath.Base(f.Name()), errors.Join(err, ErrCheckpointName))
	}
	return f, CheckpointEntry{Name: name, Generation: gen, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

func (l *localStore) Delete(_ context.Context, name string, upTo uint64) error {
	if !CheckpointNameValid(name) {
		return fmt.Errorf("checkpoint delete: %w", ErrCheckpointName)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, g := range l.generations(name) {
		if g <= upTo {
			if err := os.Remove(l.path(name, g)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	owner, _, _ := strings.Cut(name, "/")
	_ = os.Remove(filepath.Join(l.dir, owner)) // only when empty
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checkpoint delete: %w", err)
	}
	return nil
}

func (l *localStore) List(_ context.Context, prefix string) ([]CheckpointEntry, error) {
	if !CheckpointPrefixValid(prefix) {
		return nil, fmt.Errorf("checkpoint list: %w", ErrCheckpointName)
	}
	owners := []string{strings.TrimSuffix(prefix, "/")}
	if prefix == "" {
		owners = nil
		entries, _ := os.ReadDir(l.dir)
		for _, e := range entries {
			if e.IsDir() {
				owners = append(owners, e.Name())
			}
		}
	}
	newest := map[string]CheckpointEntry{}
	for _, o := range owners {
		entries, _ := os.ReadDir(filepath.Join(l.dir, o))
		for _, e := range entries {
			m := ckptFile.FindStringSubmatch(e.Name())
			if m == nil || !e.Type().IsRegular() {
				continue
			}
			g, err := strconv.ParseUint(cmp.Or(m[2], "0"), 10, 64)
			fi, ierr := e.Info()
			if err != nil || ierr != nil {
				continue
			}
			name := o + "/" + m[1]
			if old, ok := newest[name]; ok && old.Generation > g {
				continue
			}
			if _, ok := newest[name]; !ok && len(newest) >= l.maxList {
				return nil, fmt.Errorf("checkpoint list: %w", ErrCheckpointListLong)
			}
			newest[name] = CheckpointEntry{Name: name, Generation: g, Size: fi.Size(), Modified: fi.ModTime()}
		}
	}
	out := make([]CheckpointEntry, 0, len(newest))
	for _, e := range newest {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b CheckpointEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// deleteAll is Delete of every generation.
const deleteAll = math.MaxUint64
