package pool

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The checkpoint store (docs/design.md, "Lossless eviction"): one file per
// key under <StateDir>/checkpoints/<owner hash>/<key hash>.ckpt, written
// and read only by the daemon (dirs 0700, files 0600). A file is
//
//	blob | header JSON | header length (uint32, big endian) | ckptMagic
//
// written to a temporary name and renamed into place, so a reader sees a
// whole checkpoint or none. The blob is opaque here: only a kernel of the
// same key ever unpickles it, inside its own sandbox.
const (
	ckptDirName   = "checkpoints"
	ckptDirMode   = 0o700
	ckptExt       = ".ckpt"
	ckptMagic     = "KPCK1\n\x00\x00"
	ckptTrailer   = 4 + len(ckptMagic)
	maxCkptHeader = 1 << 20 // 1000 lost names of 256 bytes, escaped, fit
)

// ckptHeader describes a checkpoint; the daemon writes every field.
type ckptHeader struct {
	Owner       string    `json:"owner"`
	Mode        string    `json:"mode"`
	Interpreter string    `json:"interpreter"`
	Cwd         string    `json:"cwd"`
	Tools       string    `json:"tools"`
	SavedAt     time.Time `json:"saved_at"`
	Reason      string    `json:"reason"`
	// Size is the blob's length (0 for a refusal).
	Size       int64 `json:"size"`
	SavedTotal int   `json:"saved_total"`
	// Lost lists the names that did not pickle (LostTotal of them).
	Lost      []string `json:"lost"`
	LostTotal int      `json:"lost_total"`
	// Refused, when set, says why the state was not saved: the next
	// kernel of the key reports it instead of restoring.
	Refused string `json:"refused,omitempty"`
}

func (h *ckptHeader) key() key {
	return key{owner: h.Owner, mode: h.Mode, interpreter: h.Interpreter, cwd: h.Cwd, tools: h.Tools}
}

// CheckpointInfo describes one stored checkpoint (for ps).
type CheckpointInfo struct {
	Owner       string    `json:"owner"`
	Mode        string    `json:"mode"`
	Interpreter string    `json:"interpreter"`
	Cwd         string    `json:"cwd"`
	Tools       []string  `json:"tools"`
	Bytes       int64     `json:"bytes"`
	Names       int       `json:"names"`
	Lost        int       `json:"lost"`
	Reason      string    `json:"reason"`
	SavedAt     time.Time `json:"saved_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	Refused     string    `json:"refused,omitempty"`
}

// ckptStore is the checkpoint directory. mu serializes commits, removals
// and sweeps, so the per-owner cap holds across concurrent saves.
type ckptStore struct {
	dir       string
	maxBytes  int64
	retention time.Duration
	log       hclog.Logger
	mu        sync.Mutex
}

// openCkptStore creates (or checks) <stateDir>/checkpoints and removes
// temporary files a previous daemon left behind.
func openCkptStore(stateDir string, cfg CheckpointConfig, log hclog.Logger) (*ckptStore, error) {
	c := &ckptStore{dir: filepath.Join(stateDir, ckptDirName), maxBytes: cfg.MaxBytesPerOwner, retention: cfg.Retention, log: log}
	if err := os.MkdirAll(c.dir, ckptDirMode); err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	if fi, err := os.Lstat(c.dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint dir %s is not a directory: %w", c.dir, errors.Join(err, ErrBadRequest))
	}
	if err := os.Chmod(c.dir, ckptDirMode); err != nil {
		return nil, fmt.Errorf("chmod checkpoint dir: %w", err)
	}
	owners, _ := os.ReadDir(c.dir)
	for _, o := range owners {
		files, _ := os.ReadDir(filepath.Join(c.dir, o.Name()))
		for _, f := range files {
			if strings.HasPrefix(f.Name(), ".tmp-") {
				_ = os.Remove(filepath.Join(c.dir, o.Name(), f.Name()))
			}
		}
	}
	return c, nil
}

func hashHex(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		// Length-prefixed: no two keys hash the same input.
		_ = binary.Write(h, binary.BigEndian, uint32(len(p)))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c *ckptStore) ownerDir(owner string) string {
	return filepath.Join(c.dir, hashHex("owner", owner)[:32])
}

// path is the key's checkpoint file: a hash of the whole key, owner included.
func (c *ckptStore) path(k key) string {
	return filepath.Join(c.ownerDir(k.owner), hashHex("key", k.owner, k.mode, k.interpreter, k.cwd, k.tools)+ckptExt)
}

// usageLocked sums the sizes of owner's checkpoints other than skip.
func (c *ckptStore) usageLocked(owner, skip string) int64 {
	var n int64
	entries, _ := os.ReadDir(c.ownerDir(owner))
	for _, e := range entries {
		p := filepath.Join(c.ownerDir(owner), e.Name())
		if p == skip || !strings.HasSuffix(e.Name(), ckptExt) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// room is how many blob bytes owner may still store for k (a hint: commit
// checks again under the lock).
func (c *ckptStore) room(k key) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.maxBytes-c.usageLocked(k.owner, c.path(k))-int64(ckptTrailer), 0)
}

// create opens a temporary file in k's owner dir.
func (c *ckptStore) create(k key) (*os.File, error) {
	dir := c.ownerDir(k.owner)
	if err := os.Mkdir(dir, ckptDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create owner dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*") // 0600, O_EXCL
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	return f, nil
}

// commit appends h to f (holding h.Size blob bytes) and renames it into
// k's place, unless the owner's checkpoints would then pass the cap: the
// file is then removed and a refusal stored instead. It returns the note
// of a refusal ("" when committed). f is closed either way.
func (c *ckptStore) commit(f *os.File, k key, h *ckptHeader) (string, error) {
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // gone after a rename anyway
	// No fsync: a file torn by a power loss fails readHeader's size and
	// magic checks and is never loaded, and fsync cost tens of
	// milliseconds per eviction here.
	err := writeTrailer(f, h)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dst := c.path(k)
	if used := c.usageLocked(k.owner, dst); used+fi.Size() > c.maxBytes {
		note := fmt.Sprintf("the checkpoint (%d bytes) would take the owner's checkpoints to %d bytes, over the %d-byte cap (checkpoint_max_bytes_per_owner)",
			fi.Size(), used+fi.Size(), c.maxBytes)
		return note, c.storeRefusalLocked(k, h, note)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	return "", nil
}

// refuse stores a refusal note for k in place of its checkpoint.
func (c *ckptStore) refuse(k key, h *ckptHeader, note string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeRefusalLocked(k, h, note)
}

func (c *ckptStore) storeRefusalLocked(k key, h *ckptHeader, note string) error {
	r := *h
	r.Size, r.Refused = 0, note
	f, err := c.create(k)
	if err != nil {
		return fmt.Errorf("write refusal: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	err = writeTrailer(f, &r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.path(k))
	}
	if err != nil {
		return fmt.Errorf("write refusal: %w", err)
	}
	return nil
}

func writeTrailer(w io.Writer, h *ckptHeader) error {
	hdr, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(hdr) > maxCkptHeader {
		return fmt.Errorf("checkpoint header of %d bytes over %d", len(hdr), maxCkptHeader)
	}
	buf := bytes.NewBuffer(hdr)
	_ = binary.Write(buf, binary.BigEndian, uint32(len(hdr)))
	buf.WriteString(ckptMagic)
	_, err = w.Write(buf.Bytes())
	return err
}

// open opens k's checkpoint and reads its header. (nil, nil, nil) when k
// has none. A file whose header names another key is refused: only the
// key a checkpoint was saved for may load it.
func (c *ckptStore) open(k key) (*os.File, *ckptHeader, error) {
	f, h, err := openCkpt(c.path(k))
	if err != nil || f == nil {
		return nil, nil, err
	}
	if h.key() != k {
		_ = f.Close()
		return nil, nil, fmt.Errorf("checkpoint %s belongs to another key (owner %q), not loaded", filepath.Base(c.path(k)), h.Owner)
	}
	return f, h, nil
}

// openCkpt opens a checkpoint file without following a symlink and reads
// its header, bounded by maxCkptHeader and checked against the file size.
func openCkpt(path string) (*os.File, *ckptHeader, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open checkpoint: %w", err)
	}
	h, err := readHeader(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("checkpoint %s: %w", filepath.Base(path), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("checkpoint %s: %w", filepath.Base(path), err)
	}
	return f, h, nil
}

func readHeader(f *os.File) (*ckptHeader, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() < int64(ckptTrailer) {
		return nil, errors.New("not a checkpoint file")
	}
	var tr [ckptTrailer]byte
	if _, err := f.ReadAt(tr[:], fi.Size()-int64(ckptTrailer)); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(tr[:4]))
	if string(tr[4:]) != ckptMagic || n > maxCkptHeader || n > fi.Size()-int64(ckptTrailer) {
		return nil, errors.New("malformed checkpoint trailer")
	}
	hdr := make([]byte, n)
	if _, err := f.ReadAt(hdr, fi.Size()-int64(ckptTrailer)-n); err != nil {
		return nil, err
	}
	h := new(ckptHeader)
	if err := json.Unmarshal(hdr, h); err != nil || h.Size != fi.Size()-int64(ckptTrailer)-n {
		return nil, errors.New("malformed checkpoint header")
	}
	return h, nil
}

// remove deletes k's checkpoint (if any).
func (c *ckptStore) remove(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Remove(c.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("checkpoint not removed", "owner", k.owner, "error", err)
	}
}

// removeOwner deletes every checkpoint of owner and returns how many.
func (c *ckptStore) removeOwner(owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := c.ownerDir(owner)
	entries, _ := os.ReadDir(dir)
	if err := os.RemoveAll(dir); err != nil {
		c.log.Warn("owner checkpoints not removed", "owner", owner, "error", err)
	}
	return len(entries)
}

// each calls f with every checkpoint's path and header (unreadable files
// are skipped and logged).
func (c *ckptStore) each(f func(path string, h *ckptHeader)) {
	owners, _ := os.ReadDir(c.dir)
	for _, o := range owners {
		dir := filepath.Join(c.dir, o.Name())
		files, _ := os.ReadDir(dir)
		for _, e := range files {
			if !strings.HasSuffix(e.Name(), ckptExt) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			fh, h, err := openCkpt(path)
			if err != nil || fh == nil {
				c.log.Warn("unreadable checkpoint", "path", path, "error", err)
				continue
			}
			_ = fh.Close()
			f(path, h)
		}
	}
}

// sweep removes the checkpoints saved more than the retention before now
// and returns how many.
func (c *ckptStore) sweep(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	c.each(func(path string, h *ckptHeader) {
		if now.Sub(h.SavedAt) > c.retention {
			if err := os.Remove(path); err == nil {
				n++
			}
		}
	})
	// Owner dirs left empty go too (Remove refuses a non-empty one).
	owners, _ := os.ReadDir(c.dir)
	for _, o := range owners {
		_ = os.Remove(filepath.Join(c.dir, o.Name()))
	}
	return n
}

// list describes every checkpoint, sorted by owner, mode, then cwd.
func (c *ckptStore) list() []CheckpointInfo {
	var out []CheckpointInfo
	c.mu.Lock()
	c.each(func(path string, h *ckptHeader) {
		tools := []string{}
		if h.Tools != "" {
			tools = strings.Split(h.Tools, ",")
		}
		size := h.Size
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
		out = append(out, CheckpointInfo{
			Owner: h.Owner, Mode: h.Mode, Interpreter: h.Interpreter, Cwd: h.Cwd, Tools: tools,
			Bytes: size, Names: h.SavedTotal, Lost: h.LostTotal, Reason: h.Reason,
			SavedAt: h.SavedAt, ExpiresAt: h.SavedAt.Add(c.retention), Refused: h.Refused,
		})
	})
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b CheckpointInfo) int {
		return strings.Compare(a.Owner+"\x00"+a.Mode+"\x00"+a.Cwd, b.Owner+"\x00"+b.Mode+"\x00"+b.Cwd)
	})
	return out
}
