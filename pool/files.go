package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The files API reads and writes a live kernel's working area: its cwd,
// or its staging dir when its key has none. The daemon never resolves a
// path there the way a host program would: on Linux every step runs as
// the kernel's uid, from the kernel's own mount namespace, with openat2
// refusing symlinks, magic links and escapes (files_linux.go); elsewhere
// through an os.Root on the working dir (files_other.go). Bodies stream;
// an upload goes to a temporary name and is renamed into place only when
// whole, so a refused or failed one leaves nothing.

// FileType is the type of a listed entry.
type FileType string

// File types of FileEntry.Type.
const (
	FileRegular FileType = "file"
	FileDir     FileType = "dir"
	FileSymlink FileType = "symlink" // listed, never followed
	FileOther   FileType = "other"   // fifo, socket, device
)

// Bounds of the files API.
const (
	// DefaultFilesMaxBytes caps one upload when the mode's CellPolicy
	// sets no FilesMaxBytes.
	DefaultFilesMaxBytes = 256 << 20
	// MaxFilePath caps a path in bytes, MaxFileName one component (the
	// limits of Linux, PATH_MAX and NAME_MAX).
	MaxFilePath = 4096
	MaxFileName = 255
	// MaxListEntries caps one listing; a dir with more is listed in part
	// (Truncated).
	MaxListEntries = 10000
)

// Files errors, beside ErrNotFound (no such kernel) and ErrBadRequest.
var (
	// ErrNoFile: the path names nothing in the working area.
	ErrNoFile = errors.New("no such file or directory in the kernel's working area")
	// ErrTooLarge: an upload is over the mode's files_max_bytes.
	ErrTooLarge = errors.New("file over the size limit")
	// ErrNoSpace: the working area's filesystem (the kernel's tmpfs) is full.
	ErrNoSpace = errors.New("no space left in the kernel's working area")
	// ErrNotRegular: the path names a directory, symlink or special file
	// where a regular file is needed (or a non-directory where a listing is).
	ErrNotRegular = errors.New("not a regular file")
	// ErrFileAccess: the kernel's uid may not read or write the path.
	ErrFileAccess = errors.New("the kernel's uid may not access the path")
)

// FileEntry is one entry of a listing or of a cell's outputs.
type FileEntry struct {
	// Name is the entry's name (a listing) or its path relative to the
	// working area (a cell's outputs).
	Name  string    `json:"name"`
	Size  int64     `json:"size"`
	Type  FileType  `json:"type"`
	MTime time.Time `json:"mtime"`
}

// FileListing is one directory of a kernel's working area.
type FileListing struct {
	// Dir is the listed path relative to the working area ("" its root).
	Dir     string      `json:"dir"`
	Entries []FileEntry `json:"entries"`
	// Truncated: the dir holds more than MaxListEntries entries; Entries
	// are some of them.
	Truncated bool `json:"truncated"`
}

// fileArea is where a kernel's files live and as whom they are touched.
type fileArea struct {
	id       string
	dir      string // the working dir, absolute, as the kernel sees it
	pid      int    // the kernel's main process (its init under the sandbox)
	uid      int    // -1: the daemon's own
	mountNS  bool   // the kernel has a mount namespace of its own
	maxBytes int64
	done     <-chan struct{}
	// unreaped reports, through a pidfd, that pid still names the kernel.
	unreaped func() bool
}

// alive reports whether the kernel has not ended.
func (a fileArea) alive() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// area finds the working area of live kernel id.
func (p *Pool) area(id string) (fileArea, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byID[id]
	if s == nil || s.live == nil || s.live.id != id || s.live.spare {
		return fileArea{}, fmt.Errorf("kernel %q: %w", id, ErrNotFound)
	}
	lv := s.live
	s.lastUsed = time.Now() // a files call is use: the idle reaper waits
	a := fileArea{id: id, dir: s.key.cwd, pid: lv.pid, uid: lv.uid, done: lv.k.Done(), unreaped: unreapedOf(lv.k)}
	if a.dir == "" {
		a.dir = lv.k.StagingDir()
	}
	for _, ns := range lv.isolation.Namespaces {
		a.mountNS = a.mountNS || ns == "mnt"
	}
	a.maxBytes = p.policy(lv.mode).FilesMaxBytes
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultFilesMaxBytes
	}
	return a, nil
}

// KernelOf is the id of owner's live kernel of mode ("" any mode):
// ErrNotFound when it has none, ErrConflict when more than one match.
func (p *Pool) KernelOf(owner, mode string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for k, s := range p.slots {
		if k.owner == owner && (mode == "" || k.mode == mode) && s.live != nil && !s.live.spare {
			ids = append(ids, s.live.id)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("owner %q has no live kernel%s: %w", owner, modeNote(mode), ErrNotFound)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("owner %q has %d live kernels%s; name the mode or the kernel id: %w", owner, len(ids), modeNote(mode), ErrConflict)
}

func modeNote(mode string) string {
	if mode == "" {
		return ""
	}
	return fmt.Sprintf(" of mode %q", mode)
}

// checkFilePath validates a path relative to the working area: not
// empty (unless empty is allowed: the root of a listing), relative, no
// "." or ".." component, no empty component, no NUL or backslash, within
// MaxFilePath and MaxFileName. The daemon refuses these before touching
// anything; openat2 would refuse an escape anyway.
func checkFilePath(path string, emptyOK bool) error {
	switch {
	case path == "":
		if emptyOK {
			return nil
		}
		return badRequest(errors.New("file path is empty"))
	case len(path) > MaxFilePath:
		return badRequest(fmt.Errorf("file path is %d bytes, over the limit of %d", len(path), MaxFilePath))
	case strings.ContainsRune(path, 0):
		return badRequest(errors.New("file path contains a NUL byte"))
	case strings.ContainsRune(path, '\\'):
		return badRequest(fmt.Errorf("file path %q contains a backslash", path))
	case strings.HasPrefix(path, "/"):
		return badRequest(fmt.Errorf("file path %q is absolute; paths are relative to the kernel's working dir", path))
	}
	for _, c := range strings.Split(path, "/") {
		switch {
		case c == "" || c == ".":
			return badRequest(fmt.Errorf("file path %q has an empty or \".\" component", path))
		case c == "..":
			return badRequest(fmt.Errorf("file path %q has a \"..\" component; paths stay inside the kernel's working dir", path))
		case len(c) > MaxFileName:
			return badRequest(fmt.Errorf("file path %q has a component of %d bytes, over the limit of %d", path[:64]+"...", len(c), MaxFileName))
		}
	}
	return nil
}

// OpenFile opens file path of kernel id's working area for reading: a
// regular file, reached without following any symlink. The caller closes it.
func (p *Pool) OpenFile(id, path string) (io.ReadCloser, int64, error) {
	if err := checkFilePath(path, false); err != nil {
		return nil, 0, fmt.Errorf("read file: %w", err)
	}
	a, err := p.area(id)
	if err != nil {
		return nil, 0, fmt.Errorf("read file: %w", err)
	}
	f, size, err := a.open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read file %s: %w", path, err)
	}
	return f, size, nil
}

// WriteFile writes r to file path of kernel id's working area, creating
// its parent dirs, as the kernel's uid. size is the body's announced
// length (-1: unknown): over the mode's limit it is refused before a
// byte is read. The file replaces any entry of that name only once whole;
// a body over the limit (ErrTooLarge), a full tmpfs (ErrNoSpace) or a
// failed read leaves no file behind. It returns the bytes written.
func (p *Pool) WriteFile(ctx context.Context, id, path string, r io.Reader, size int64) (int64, error) {
	if err := checkFilePath(path, false); err != nil {
		return 0, fmt.Errorf("write file: %w", err)
	}
	a, err := p.area(id)
	if err != nil {
		return 0, fmt.Errorf("write file: %w", err)
	}
	if size > a.maxBytes {
		return 0, fmt.Errorf("write file %s: %d bytes: %w of %d bytes (files_max_bytes)", path, size, ErrTooLarge, a.maxBytes)
	}
	n, err := a.write(ctx, path, r)
	if err != nil {
		return 0, fmt.Errorf("write file %s: %w", path, err)
	}
	return n, nil
}

// DeleteFile removes file path (or an empty dir) of kernel id's working area.
func (p *Pool) DeleteFile(id, path string) error {
	if err := checkFilePath(path, false); err != nil {
		return fmt.Errorf("delete file: %w", err)
	}
	a, err := p.area(id)
	if err != nil {
		return fmt.Errorf("delete file: %w", err)
	}
	if err := a.remove(path); err != nil {
		return fmt.Errorf("delete file %s: %w", path, err)
	}
	return nil
}

// ListFiles lists dir ("" the working dir itself) of kernel id's working
// area: at most MaxListEntries entries, sorted by name.
func (p *Pool) ListFiles(id, dir string) (*FileListing, error) {
	dir = strings.TrimSuffix(dir, "/")
	if dir == "." {
		dir = ""
	}
	if err := checkFilePath(dir, true); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	a, err := p.area(id)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	l, err := a.list(dir, MaxListEntries)
	if err != nil {
		return nil, fmt.Errorf("list files %q: %w", dir, err)
	}
	l.Dir = dir
	return l, nil
}
