package ckpts3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/kernpool/kernpool/pool"
)

// Store is a pool.CheckpointStore in an S3 bucket.
type Store struct {
	c        *minio.Client
	bucket   string
	prefix   string // "" or ending in "/"
	maxBytes int64
	desc     string
}

var _ pool.CheckpointStore = (*Store)(nil)

// MaxObjectBytes is the largest object one PUT stores (S3's limit), so
// the largest checkpoint_max_bytes_per_owner an S3 store takes.
const MaxObjectBytes = 5 << 30

// genDigits is the width of a generation in an object key: keys sort as
// their generations do.
const genDigits = 20

// Open checks cfg, then reaches the bucket (ctx bounds it): a store that
// is misconfigured or cannot be reached is an error here, at start, never
// a silent fallback to local files.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	p, err := cfg.parse()
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	// Three tries, not ten: a save or a start that cannot reach the store
	// says why (the last error) well within checkpoint_timeout.
	opts := &minio.Options{Creds: p.creds, Secure: p.secure, Region: p.region, Transport: cfg.Transport, MaxRetries: 3}
	if p.path {
		opts.BucketLookup = minio.BucketLookupPath
	}
	c, err := minio.New(p.host, opts)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	s := &Store{c: c, bucket: p.bucket, maxBytes: cfg.MaxObjectBytes, desc: "s3://" + p.bucket + "/" + p.prefix + " at " + p.host}
	if p.prefix != "" {
		s.prefix = p.prefix + "/"
	}
	ok, err := c.BucketExists(ctx, p.bucket)
	switch {
	case err != nil:
		return nil, fmt.Errorf("open checkpoint store %s: %w", s.desc, err)
	case !ok:
		return nil, fmt.Errorf("open checkpoint store %s: %w", s.desc, ErrNoBucket)
	}
	// A list proves the key may read the prefix (BucketExists only needs
	// the bucket to be visible).
	if _, err := s.List(ctx, ""); err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	return s, nil
}

// Describe names the bucket, prefix and endpoint (no credentials).
func (s *Store) Describe() string { return s.desc }

func (s *Store) objectKey(name string, gen uint64) string {
	g := strconv.FormatUint(gen, 10)
	return s.prefix + name + "/" + strings.Repeat("0", genDigits-len(g)) + g + ".ckpt"
}

// generations lists name's stored generations, oldest first.
func (s *Store) generations(ctx context.Context, name string) ([]pool.CheckpointEntry, error) {
	var out []pool.CheckpointEntry
	err := s.list(ctx, s.prefix+name+"/", func(e pool.CheckpointEntry) error {
		if e.Name != name {
			return nil
		}
		if len(out) >= pool.MaxCheckpointList {
			return pool.ErrCheckpointListLong
		}
		out = append(out, e)
		return nil
	})
	slices.SortFunc(out, func(a, b pool.CheckpointEntry) int {
		return cmpU(a.Generation, b.Generation)
	})
	return out, err
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// list calls f with every generation object under keyPrefix (objects
// that are not ones this store writes are skipped).
func (s *Store) list(ctx context.Context, keyPrefix string, f func(pool.CheckpointEntry) error) error {
	for o := range s.c.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: keyPrefix, Recursive: true}) {
		if o.Err != nil {
			return o.Err
		}
		name, gen, ok := s.parseKey(o.Key)
		if !ok {
			continue
		}
		if err := f(pool.CheckpointEntry{Name: name, Generation: gen, Size: o.Size, Modified: o.LastModified}); err != nil {
			return err
		}
	}
	return nil
}

// parseKey splits an object key into the name and generation.
func (s *Store) parseKey(key string) (string, uint64, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix)
	i := strings.LastIndexByte(rest, '/')
	if !ok || i < 0 {
		return "", 0, false
	}
	g, ok := strings.CutSuffix(rest[i+1:], ".ckpt")
	gen, err := strconv.ParseUint(g, 10, 64)
	if !ok || len(g) != genDigits || err != nil || !pool.CheckpointNameValid(rest[:i]) {
		return "", 0, false
	}
	return rest[:i], gen, true
}

// Put writes generation gen with If-None-Match: *, after checking that no
// newer generation is listed. Two writers of one generation: the server
// takes one, the other gets 412 (ErrStaleGeneration). A writer of an
// older generation that lists before a newer one lands may still write
// its object, but readers take the newest, and the next Put removes it.
func (s *Store) Put(ctx context.Context, name string, gen uint64, body io.Reader, size int64) error {
	if !pool.CheckpointNameValid(name) || gen == 0 {
		return fmt.Errorf("checkpoint put: %w", pool.ErrCheckpointName)
	}
	gens, err := s.generations(ctx, name)
	if err != nil {
		return fmt.Errorf("checkpoint put: %w", err)
	}
	if len(gens) > 0 && gens[len(gens)-1].Generation >= gen {
		return fmt.Errorf("checkpoint put: generation %d, stored %d: %w", gen, gens[len(gens)-1].Generation, pool.ErrStaleGeneration)
	}
	if size > MaxObjectBytes {
		return fmt.Errorf("checkpoint put: %d bytes: %w", size, ErrObjectTooBig)
	}
	// One PUT, never a multipart upload: the conditional create then
	// holds for the whole object, and a file body is streamed as it is.
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	if _, err := s.c.PutObject(ctx, s.bucket, s.objectKey(name, gen), body, size, opts); err != nil {
		if isPrecondition(err) {
			return fmt.Errorf("checkpoint put: generation %d: %w", gen, pool.ErrStaleGeneration)
		}
		return fmt.Errorf("checkpoint put: %w", err)
	}
	for _, g := range gens {
		_ = s.c.RemoveObject(ctx, s.bucket, s.objectKey(name, g.Generation), minio.RemoveObjectOptions{})
	}
	return nil
}

func isPrecondition(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed"
}

// Get opens the newest generation listed. The object is read by ranged
// GETs, so nothing is buffered whole here.
func (s *Store) Get(ctx context.Context, name string) (pool.CheckpointObject, pool.CheckpointEntry, error) {
	if !pool.CheckpointNameValid(name) {
		return nil, pool.CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", pool.ErrCheckpointName)
	}
	gens, err := s.generations(ctx, name)
	if err != nil {
		return nil, pool.CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", err)
	}
	if len(gens) == 0 {
		return nil, pool.CheckpointEntry{}, fmt.Errorf("checkpoint get: %w", pool.ErrCheckpointNotFound)
	}
	e := gens[len(gens)-1]
	if s.maxBytes > 0 && e.Size > s.maxBytes {
		return nil, e, fmt.Errorf("checkpoint get: %d bytes, over %d: %w", e.Size, s.maxBytes, ErrObjectTooBig)
	}
	// The object outlives ctx (the caller streams it after Get returns):
	// it gets a context of its own, ended by Close, with ctx's deadline
	// still bounding a server that stops answering.
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if dl, ok := ctx.Deadline(); ok {
		cancel()
		octx, cancel = context.WithDeadline(context.WithoutCancel(ctx), dl)
	}
	obj, err := s.c.GetObject(octx, s.bucket, s.objectKey(name, e.Generation), minio.GetObjectOptions{})
	if err != nil {
		cancel()
		return nil, e, fmt.Errorf("checkpoint get: %w", err)
	}
	st, err := obj.Stat()
	switch {
	case minio.ToErrorResponse(err).Code == minio.NoSuchKey:
		err = pool.ErrCheckpointNotFound // removed since the list
	case err == nil && st.Size != e.Size:
		err = fmt.Errorf("object of %d bytes, %d listed", st.Size, e.Size)
	}
	if err != nil {
		_ = obj.Close()
		cancel()
		return nil, e, fmt.Errorf("checkpoint get: %w", err)
	}
	return &object{Object: obj, cancel: cancel}, e, nil
}

// object ends its context with Close.
type object struct {
	*minio.Object
	cancel context.CancelFunc
}

func (o *object) Close() error {
	err := o.Object.Close()
	o.cancel()
	return err
}

// Delete removes name's generations up to upTo.
func (s *Store) Delete(ctx context.Context, name string, upTo uint64) error {
	if !pool.CheckpointNameValid(name) {
		return fmt.Errorf("checkpoint delete: %w", pool.ErrCheckpointName)
	}
	gens, err := s.generations(ctx, name)
	if err != nil {
		return fmt.Errorf("checkpoint delete: %w", err)
	}
	var errs []error
	for _, g := range gens {
		if g.Generation <= upTo {
			if err := s.c.RemoveObject(ctx, s.bucket, s.objectKey(name, g.Generation), minio.RemoveObjectOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checkpoint delete: %w", err)
	}
	return nil
}

// List gives the newest generation of every name under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]pool.CheckpointEntry, error) {
	if !pool.CheckpointPrefixValid(prefix) {
		return nil, fmt.Errorf("checkpoint list: %w", pool.ErrCheckpointName)
	}
	newest := map[string]pool.CheckpointEntry{}
	err := s.list(ctx, s.prefix+prefix, func(e pool.CheckpointEntry) error {
		if old, ok := newest[e.Name]; ok && old.Generation > e.Generation {
			return nil
		}
		if _, ok := newest[e.Name]; !ok && len(newest) >= pool.MaxCheckpointList {
			return pool.ErrCheckpointListLong
		}
		newest[e.Name] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint list %s: %w", s.desc, err)
	}
	out := make([]pool.CheckpointEntry, 0, len(newest))
	for _, e := range newest {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b pool.CheckpointEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
