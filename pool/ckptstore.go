package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// CheckpointStore is the port the checkpoints of persist modes are kept
// behind (docs/design.md, "Checkpoint store"). The pool names objects and
// writes their bytes; a store only keeps them. Each name holds numbered
// generations: a kernel restored from generation g saves g+1, g+2, ...,
// and a store never lets an older generation replace a newer one, so a
// node that saves late (a lost network partition, a slow save) cannot
// overwrite the state another node saved after it.
//
// The pool's own adapter keeps files under the state dir (the default);
// others live in their own packages, import this one and are wired by
// pool/daemon (pool/ckpts3: S3 and S3-compatible object stores).
type CheckpointStore interface {
	// Put stores size bytes read from body as generation gen (>= 1) of
	// name. It fails with ErrStaleGeneration, storing nothing, when name
	// already holds gen or a newer generation, and removes name's older
	// generations once gen is stored (a failure there is logged by the
	// next Put or List, never fatal).
	Put(ctx context.Context, name string, gen uint64, body io.Reader, size int64) error
	// Get opens name's newest generation; the error wraps
	// ErrCheckpointNotFound when name has none.
	Get(ctx context.Context, name string) (CheckpointObject, CheckpointEntry, error)
	// Delete removes name's generations up to and including upTo
	// (math.MaxUint64: all of them); a newer generation stays.
	Delete(ctx context.Context, name string, upTo uint64) error
	// List gives the newest generation of every name that starts with
	// prefix ("" for all), at most MaxCheckpointList of them (more is an
	// error wrapping ErrCheckpointListLong).
	List(ctx context.Context, prefix string) ([]CheckpointEntry, error)
	// Describe names the store for logs and errors (no credentials).
	Describe() string
}

// CheckpointObject is one stored generation, read by ranges (the header
// sits at its end) and as a stream (the blob is streamed into a kernel).
type CheckpointObject interface {
	io.ReaderAt
	io.ReadSeeker
	io.Closer
}

// CheckpointEntry describes one stored generation.
type CheckpointEntry struct {
	Name       string
	Generation uint64
	Size       int64
	Modified   time.Time
}

// MaxCheckpointList bounds how many names one List returns: a store
// that holds more (or a bucket prefix another writer fills) is refused
// rather than read into memory without bound.
const MaxCheckpointList = 100_000

// Store errors (wrapped by the adapters with the operation).
var (
	// ErrStaleGeneration: a Put's generation is not newer than the one
	// stored: another save won, and this one is dropped.
	ErrStaleGeneration = errors.New("a newer checkpoint generation is stored")
	// ErrCheckpointNotFound: the name has no stored generation.
	ErrCheckpointNotFound = errors.New("no checkpoint stored")
	// ErrCheckpointListLong: a List would pass MaxCheckpointList names.
	ErrCheckpointListLong = fmt.Errorf("more than %d checkpoints listed", MaxCheckpointList)
	// ErrCheckpointName: a name is not one the pool makes.
	ErrCheckpointName = errors.New("malformed checkpoint name")
)

// checkpointName is what the pool names objects: the owner's hash, a
// slash, the key's hash (ckptStore.name). Adapters accept nothing else,
// so no name reaches outside their directory or prefix.
var checkpointName = regexp.MustCompile(`^[0-9a-f]{32}/[0-9a-f]{64}$`)

// CheckpointNameValid reports whether name is one the pool makes
// (adapters check every name they are given).
func CheckpointNameValid(name string) bool { return checkpointName.MatchString(name) }

// CheckpointPrefixValid reports whether prefix is one List is called
// with: "" (every name) or an owner's hash and a slash.
func CheckpointPrefixValid(prefix string) bool {
	return prefix == "" || (len(prefix) == 33 && checkpointName.MatchString(prefix+"0000000000000000000000000000000000000000000000000000000000000000"))
}
