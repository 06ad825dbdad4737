package pool

import (
	"bytes"
	"context"
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

// Checkpoints (docs/design.md, "Lossless eviction"): one object per key
// and generation in a CheckpointStore (by default files under
// <StateDir>/checkpoints, ckptlocal.go), written and read only by the
// daemon. An object is
//
//	blob | header JSON | header length (uint32, big endian) | ckptMagic
//
// spooled to a temporary file and then stored whole, so a reader sees a
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
	Session     string    `json:"session,omitempty"`
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
	return key{owner: h.Owner, mode: h.Mode, interpreter: h.Interpreter, cwd: h.Cwd, tools: h.Tools, session: h.Session}
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
	// Generation is the stored generation's number (CheckpointStore).
	Generation uint64 `json:"generation"`
	Refused    string `json:"refused,omitempty"`
}

// ckptStore keeps checkpoints in a CheckpointStore, spooling each save
// through a temporary file under dir (which is also the local store's
// directory). mu serializes commits, removals and sweeps, so the
// per-owner cap holds across concurrent saves of this daemon.
type ckptStore struct {
	st        CheckpointStore
	dir       string
	maxBytes  int64
	retention time.Duration
	timeout   time.Duration
	log       hclog.Logger
	mu        sync.Mutex
	// createTemp is os.CreateTemp; a test replaces it to remove the
	// owner dir first, as a sweep may.
	createTemp func(dir, pattern string) (*os.File, error)
}

// openCkptStore opens the checkpoint store: cfg.Store when set, else the
// local store under <stateDir>/checkpoints.
func openCkptStore(stateDir string, cfg CheckpointConfig, log hclog.Logger) (*ckptStore, error) {
	local, err := newLocalStore(filepath.Join(stateDir, ckptDirName))
	if err != nil {
		return nil, err
	}
	c := &ckptStore{st: cfg.Store, dir: local.dir, maxBytes: cfg.MaxBytesPerOwner, retention: cfg.Retention, timeout: cfg.Timeout, log: log, createTemp: os.CreateTemp}
	if c.st == nil {
		c.st = local
	}
	if c.timeout <= 0 {
		c.timeout = DefaultCheckpointTimeout
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

func ownerPrefix(owner string) string { return hashHex("owner", owner)[:32] + "/" }

// name is k's object name: the owner's hash, then a hash of the whole
// key, owner included.
func (c *ckptStore) name(k key) string {
	if k.session != "" { // a session's kernel is its own key
		return ownerPrefix(k.owner) + hashHex("key", k.owner, k.mode, k.interpreter, k.cwd, k.tools, "session", k.session)
	}
	return ownerPrefix(k.owner) + hashHex("key", k.owner, k.mode, k.interpreter, k.cwd, k.tools)
}

// ctx bounds one store operation.
func (c *ckptStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

// usageLocked sums the sizes of owner's checkpoints other than skip's.
func (c *ckptStore) usageLocked(owner, skip string) (int64, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.st.List(ctx, ownerPrefix(owner))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range list {
		if e.Name != skip {
			n += e.Size
		}
	}
	return n, nil
}

// room is how many blob bytes owner may still store for k (a hint: commit
// checks again under the lock).
func (c *ckptStore) room(k key) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	used, err := c.usageLocked(k.owner, c.name(k))
	if err != nil {
		c.log.Warn("checkpoint store not listed", "store", c.st.Describe(), "error", err)
	}
	return max(c.maxBytes-used-int64(ckptTrailer), 0)
}

// create opens a temporary file for k's save in the spool dir.
func (c *ckptStore) create(k key) (*os.File, error) {
	dir := filepath.Join(c.dir, strings.TrimSuffix(ownerPrefix(k.owner), "/"))
	for try := 0; ; try++ {
		if err := os.Mkdir(dir, ckptDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create owner dir: %w", err)
		}
		f, err := c.createTemp(dir, ".tmp-*") // 0600, O_EXCL
		// A sweep or another save's cleanup may remove the dir while
		// it is empty: make it again.
		if errors.Is(err, fs.ErrNotExist) && try < 3 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		return f, nil
	}
}

// discard removes a temporary file create made (and its owner dir when
// that is left empty).
func (c *ckptStore) discard(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
	_ = os.Remove(filepath.Dir(f.Name()))
}

// commit appends h to f (holding h.Size blob bytes) and stores it as
// generation gen of k, unless the owner's checkpoints would then pass the
// cap: a refusal is then stored instead. It returns the note of a
// refusal ("" when committed). f is closed and removed either way.
func (c *ckptStore) commit(f *os.File, k key, h *ckptHeader, gen uint64) (string, error) {
	defer c.discard(f)
	// No fsync: a file torn by a power loss fails readHeader's size and
	// magic checks and is never loaded, and fsync cost tens of
	// milliseconds per eviction here.
	if err := writeTrailer(f, h); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	used, err := c.usageLocked(k.owner, c.name(k))
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	if used+size > c.maxBytes {
		note := fmt.Sprintf("the checkpoint (%d bytes) would take the owner's checkpoints to %d bytes, over the %d-byte cap (checkpoint_max_bytes_per_owner)",
			size, used+size, c.maxBytes)
		return note, c.storeRefusalLocked(k, h, note, gen)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.st.Put(ctx, c.name(k), gen, f, size); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	return "", nil
}

// refuse stores a refusal note for k as generation gen.
func (c *ckptStore) refuse(k key, h *ckptHeader, note string, gen uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeRefusalLocked(k, h, note, gen)
}

func (c *ckptStore) storeRefusalLocked(k key, h *ckptHeader, note string, gen uint64) error {
	r := *h
	r.Size, r.Refused = 0, note
	var buf bytes.Buffer
	if err := writeTrailer(&buf, &r); err != nil {
		return fmt.Errorf("write refusal: %w", err)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.st.Put(ctx, c.name(k), gen, bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
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

// open opens k's newest checkpoint and reads its header. (nil, nil, 0,
// nil) when k has none. An object over the owner's cap, or whose header
// names another key, is refused: only the key a checkpoint was saved for
// may load it.
func (c *ckptStore) open(k key) (CheckpointObject, *ckptHeader, uint64, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	obj, e, err := c.st.Get(ctx, c.name(k))
	if errors.Is(err, ErrCheckpointNotFound) {
		return nil, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open checkpoint: %w", err)
	}
	h, err := c.header(obj, e)
	if err == nil && h.key() != k {
		err = fmt.Errorf("checkpoint %s belongs to another key (owner %q), not loaded", e.Name, h.Owner)
	}
	if err != nil {
		_ = obj.Close()
		return nil, nil, e.Generation, err
	}
	if _, err := obj.Seek(0, io.SeekStart); err != nil {
		_ = obj.Close()
		return nil, nil, e.Generation, fmt.Errorf("checkpoint %s: %w", e.Name, err)
	}
	return obj, h, e.Generation, nil
}

// header reads an object's header, refusing an object larger than any
// checkpoint the cap lets the pool store.
func (c *ckptStore) header(obj CheckpointObject, e CheckpointEntry) (*ckptHeader, error) {
	if e.Size > c.maxBytes+maxCkptHeader+int64(ckptTrailer) {
		return nil, fmt.Errorf("checkpoint %s: %d bytes, over the %d-byte cap", e.Name, e.Size, c.maxBytes)
	}
	h, err := readHeader(obj, e.Size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", e.Name, err)
	}
	return h, nil
}

func readHeader(r io.ReaderAt, size int64) (*ckptHeader, error) {
	if size < int64(ckptTrailer) {
		return nil, errors.New("not a checkpoint file")
	}
	var tr [ckptTrailer]byte
	if _, err := r.ReadAt(tr[:], size-int64(ckptTrailer)); err != nil && !(errors.Is(err, io.EOF)) {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(tr[:4]))
	if string(tr[4:]) != ckptMagic || n > maxCkptHeader || n > size-int64(ckptTrailer) {
		return nil, errors.New("malformed checkpoint trailer")
	}
	hdr := make([]byte, n)
	if got, err := r.ReadAt(hdr, size-int64(ckptTrailer)-n); int64(got) != n {
		return nil, fmt.Errorf("checkpoint header cut short: %w", err)
	}
	h := new(ckptHeader)
	if err := json.Unmarshal(hdr, h); err != nil || h.Size != size-int64(ckptTrailer)-n {
		return nil, errors.New("malformed checkpoint header")
	}
	return h, nil
}

// remove deletes k's checkpoint generations up to upTo.
func (c *ckptStore) remove(k key, upTo uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.st.Delete(ctx, c.name(k), upTo); err != nil {
		c.log.Warn("checkpoint not removed", "owner", k.owner, "error", err)
	}
}

// removeOwner deletes every checkpoint of owner and returns how many.
func (c *ckptStore) removeOwner(owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.st.List(ctx, ownerPrefix(owner))
	if err != nil {
		c.log.Warn("owner checkpoints not listed", "owner", owner, "error", err)
	}
	n := 0
	for _, e := range list {
		if err := c.st.Delete(ctx, e.Name, deleteAll); err != nil {
			c.log.Warn("owner checkpoint not removed", "owner", owner, "error", err)
			continue
		}
		n++
	}
	return n
}

// sweep removes the checkpoints stored more than the retention before
// now and returns how many.
func (c *ckptStore) sweep(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.st.List(ctx, "")
	if err != nil {
		c.log.Warn("checkpoint store not listed", "store", c.st.Describe(), "error", err)
	}
	n := 0
	for _, e := range list {
		if now.Sub(e.Modified) > c.retention && c.st.Delete(ctx, e.Name, e.Generation) == nil {
			n++
		}
	}
	// Spool dirs left empty go (Remove refuses a non-empty one).
	owners, _ := os.ReadDir(c.dir)
	for _, o := range owners {
		_ = os.Remove(filepath.Join(c.dir, o.Name()))
	}
	return n
}

// list describes every checkpoint, sorted by owner, mode, then cwd
// (unreadable ones are skipped and logged).
func (c *ckptStore) list() []CheckpointInfo {
	var out []CheckpointInfo
	c.mu.Lock()
	ctx, cancel := c.ctx()
	entries, err := c.st.List(ctx, "")
	if err != nil {
		c.log.Warn("checkpoint store not listed", "store", c.st.Describe(), "error", err)
	}
	for _, e := range entries {
		if h, err := c.headerOf(ctx, e.Name); err != nil {
			c.log.Warn("unreadable checkpoint", "name", e.Name, "error", err)
		} else if h != nil {
			out = append(out, c.info(h, e))
		}
	}
	cancel()
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b CheckpointInfo) int {
		return strings.Compare(a.Owner+"\x00"+a.Mode+"\x00"+a.Cwd, b.Owner+"\x00"+b.Mode+"\x00"+b.Cwd)
	})
	return out
}

// headerOf reads the header of name's newest generation (nil when it is gone).
func (c *ckptStore) headerOf(ctx context.Context, name string) (*ckptHeader, error) {
	obj, e, err := c.st.Get(ctx, name)
	if errors.Is(err, ErrCheckpointNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = obj.Close() }()
	return c.header(obj, e)
}

func (c *ckptStore) info(h *ckptHeader, e CheckpointEntry) CheckpointInfo {
	tools := []string{}
	if h.Tools != "" {
		tools = strings.Split(h.Tools, ",")
	}
	return CheckpointInfo{
		Owner: h.Owner, Mode: h.Mode, Interpreter: h.Interpreter, Cwd: h.Cwd, Tools: tools,
		Bytes: e.Size, Names: h.SavedTotal, Lost: h.LostTotal, Reason: h.Reason, Generation: e.Generation,
		SavedAt: h.SavedAt, ExpiresAt: h.SavedAt.Add(c.retention), Refused: h.Refused,
	}
}
