package pool

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func newStore(t *testing.T, maxBytes int64) *ckptStore {
	t.Helper()
	c, err := openCkptStore(testTempDir(t), CheckpointConfig{MaxBytesPerOwner: maxBytes, Retention: time.Hour}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// storeBlob commits a blob of n bytes for k and returns the refusal note.
func storeBlob(t *testing.T, c *ckptStore, k key, n int) string {
	t.Helper()
	return storeBlobAt(t, c, k, n, time.Now(), "")
}

// storeBlobAt is storeBlob with the header's save time and session given.
func storeBlobAt(t *testing.T, c *ckptStore, k key, n int, at time.Time, session string) string {
	t.Helper()
	f, err := c.create(k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	h := &ckptHeader{Owner: k.owner, Mode: k.mode, Interpreter: k.interpreter, Cwd: k.cwd, Tools: k.tools, Session: session, SavedAt: at, Size: int64(n), SavedTotal: 1}
	note, err := c.commit(f, k, h, nextGen(t, c, k))
	if err != nil {
		t.Fatal(err)
	}
	return note
}

// nextGen is the generation after k's newest.
func nextGen(t *testing.T, c *ckptStore, k key) uint64 {
	t.Helper()
	obj, e, err := c.st.Get(context.Background(), c.name(k))
	if errors.Is(err, ErrCheckpointNotFound) {
		return 1
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = obj.Close()
	return e.Generation + 1
}

// localPath is the file of generation gen of k in the local store.
func (c *ckptStore) localPath(k key, gen uint64) string {
	return c.st.(*localStore).path(c.name(k), gen)
}

// TestCkptStoreOwnerCap: the cap counts all of one owner's checkpoints
// (a key's own older one excepted), never another owner's, and is checked
// again when a checkpoint is committed; a refused one leaves only a note.
func TestCkptStoreOwnerCap(t *testing.T) {
	c := newStore(t, 1000)
	a1, a2, b1 := capKeys()
	if note := storeBlob(t, c, a1, 600); note != "" {
		t.Fatalf("first: %s", note)
	}
	if note := storeBlob(t, c, a1, 650); note != "" { // replaces its own
		t.Fatalf("replace: %s", note)
	}
	if note := storeBlob(t, c, b1, 650); note != "" { // another owner's cap
		t.Fatalf("other owner: %s", note)
	}
	note := storeBlob(t, c, a2, 300)
	if !strings.Contains(note, "over the 1000-byte cap") {
		t.Fatalf("over the cap: note %q", note)
	}
	f, h, _, err := c.open(a2)
	if err != nil || f == nil || h.Refused != note || h.Size != 0 {
		t.Fatalf("refusal: %+v %v", h, err)
	}
	_ = f.Close()
	var files []string
	_ = filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, filepath.Base(p))
		}
		return nil
	})
	if len(files) != 3 || strings.Contains(strings.Join(files, " "), ".tmp-") {
		t.Fatalf("files = %v", files)
	}
}

// TestCkptStoreMalformed: a damaged file, a forged header length or a
// symlink in a checkpoint's place is refused, never followed.
func TestCkptStoreMalformed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	c := newStore(t, 1<<20)
	k := key{owner: "a", mode: "default", interpreter: "/py"}
	storeBlob(t, c, k, 100)
	path := c.localPath(k, 1)
	good, _ := os.ReadFile(path)
	forged := append([]byte{}, good...)
	binary.BigEndian.PutUint32(forged[len(forged)-ckptTrailer:], 1<<31)
	target := filepath.Join(testTempDir(t), "elsewhere")
	if err := os.WriteFile(target, good, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]func() error{
		"truncated":     func() error { return os.WriteFile(path, good[:len(good)-3], 0o600) },
		"forged length": func() error { return os.WriteFile(path, forged, 0o600) },
		"blob cut":      func() error { return os.WriteFile(path, good[10:], 0o600) },
		"symlink":       func() error { _ = os.Remove(path); return os.Symlink(target, path) },
	} {
		if err := set(); err != nil {
			t.Fatal(err)
		}
		if f, h, _, err := c.open(k); err == nil || f != nil || h != nil {
			t.Fatalf("%s: opened (%+v, %v)", name, h, err)
		}
		_ = os.Remove(path)
	}
}

// A store opened without a timeout bounds each store operation by the
// default 60 s (docs/config.md), never by an already expired context.
func TestCkptStoreDefaultTimeout(t *testing.T) {
	c := newStore(t, 0) // no Timeout configured
	ctx, cancel := c.ctx()
	defer cancel()
	deadline, ok := ctx.Deadline()
	if err := ctx.Err(); err != nil || !ok || time.Until(deadline) <= 50*time.Second || time.Until(deadline) > time.Minute {
		t.Fatalf("store operation context: err %v, deadline in %v; want a live one about 60s out", err, time.Until(deadline))
	}
}

// capKeys are the owner-cap tests' keys: a1 and a2 of owner a (a2 in
// another cwd), b1 of owner b.
func capKeys() (a1, a2, b1 key) {
	a1 = key{owner: "a", mode: "default", interpreter: "/py"}
	a2, b1 = a1, a1
	a2.cwd = "/w"
	b1.owner = "b"
	return a1, a2, b1
}
