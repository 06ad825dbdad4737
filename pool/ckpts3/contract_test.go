package ckpts3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/s3test"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/ckpts3"
)

// The contract every pool.CheckpointStore keeps, run over the local
// store and the S3 store (a real S3 protocol server on loopback).

const (
	owner1 = "0123456789abcdef0123456789abcdef"
	owner2 = "fedcba9876543210fedcba9876543210"
	key64  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyB   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// stores opens a fresh store of each kind.
func stores(t *testing.T) map[string]pool.CheckpointStore {
	t.Helper()
	local, err := pool.NewLocalCheckpointStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]pool.CheckpointStore{"local": local, "s3": openS3(t, s3test.Start(t, "ckpt"), "s3://ckpt/fleet/a")}
}

func openS3(t *testing.T, srv *s3test.Server, url string) *ckpts3.Store {
	t.Helper()
	env := srv.Env()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ckpts3.Open(ctx, ckpts3.Config{URL: url, AllowHTTP: true, MaxObjectBytes: 1 << 30, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s pool.CheckpointStore, name string, gen uint64, body string) error {
	t.Helper()
	return s.Put(context.Background(), name, gen, strings.NewReader(body), int64(len(body)))
}

// read returns name's newest generation and its bytes, read both by
// ranges and as a stream.
func read(t *testing.T, s pool.CheckpointStore, name string) (uint64, string, error) {
	t.Helper()
	obj, e, err := s.Get(context.Background(), name)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = obj.Close() }()
	tail := make([]byte, min(3, e.Size))
	if _, err := obj.ReadAt(tail, e.Size-int64(len(tail))); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt: %v", err)
	}
	if _, err := obj.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(all)) != e.Size || !bytes.HasSuffix(all, tail) {
		t.Fatalf("read %d bytes (tail %q), entry says %d", len(all), tail, e.Size)
	}
	return e.Generation, string(all), nil
}

func TestStoreContract(t *testing.T) {
	for kind, s := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			n1, n2, n3 := owner1+"/"+key64, owner1+"/"+keyB, owner2+"/"+key64
			if _, _, err := s.Get(ctx, n1); !errors.Is(err, pool.ErrCheckpointNotFound) {
				t.Fatalf("empty Get: %v", err)
			}
			if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
				t.Fatalf("empty List: %v %v", l, err)
			}
			for _, step := range []struct {
				name string
				gen  uint64
				body string
				want error
			}{
				{n1, 1, "first", nil},
				{n1, 1, "same generation again", pool.ErrStaleGeneration},
				{n1, 3, "third", nil},
				{n1, 2, "late older generation", pool.ErrStaleGeneration},
				{n2, 1, "other key", nil},
				{n3, 7, "other owner", nil},
			} {
				if err := put(t, s, step.name, step.gen, step.body); !errors.Is(err, step.want) || (step.want == nil) != (err == nil) {
					t.Fatalf("put %d %q: %v, want %v", step.gen, step.body, err, step.want)
				}
			}
			if gen, body, err := read(t, s, n1); err != nil || gen != 3 || body != "third" {
				t.Fatalf("newest of n1: %d %q %v", gen, body, err)
			}
			l, err := s.List(ctx, owner1+"/")
			if err != nil || len(l) != 2 || l[0].Name != n1 || l[0].Generation != 3 || l[0].Size != 5 || l[1].Name != n2 || time.Since(l[0].Modified) > time.Hour {
				t.Fatalf("owner list = %+v %v", l, err)
			}
			if l, _ := s.List(ctx, ""); len(l) != 3 {
				t.Fatalf("full list = %+v", l)
			}
			if err := s.Delete(ctx, n1, 2); err != nil { // keeps the newer 3
				t.Fatal(err)
			}
			if gen, _, err := read(t, s, n1); err != nil || gen != 3 {
				t.Fatalf("after Delete(2): %d %v", gen, err)
			}
			if err := s.Delete(ctx, n1, 3); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Get(ctx, n1); !errors.Is(err, pool.ErrCheckpointNotFound) {
				t.Fatalf("after Delete(3): %v", err)
			}
			// A body shorter than announced stores nothing. (Not a
			// seeker: the S3 client would retry one for seconds.)
			if err := s.Put(ctx, n1, 4, io.MultiReader(strings.NewReader("abc")), 10); err == nil {
				t.Fatal("short body stored")
			}
			if _, _, err := s.Get(ctx, n1); !errors.Is(err, pool.ErrCheckpointNotFound) {
				t.Fatalf("after a short body: %v", err)
			}
			for _, bad := range []string{"../" + key64, owner1 + "/../x", owner1, owner1 + "/" + key64 + "/x", strings.ToUpper(owner1) + "/" + key64} {
				if err := put(t, s, bad, 1, "x"); !errors.Is(err, pool.ErrCheckpointName) {
					t.Fatalf("name %q: %v", bad, err)
				}
			}
			if _, err := s.List(ctx, "../"); !errors.Is(err, pool.ErrCheckpointName) {
				t.Fatalf("list ../: %v", err)
			}
			if err := put(t, s, n1, 0, "x"); !errors.Is(err, pool.ErrCheckpointName) {
				t.Fatalf("generation 0: %v", err)
			}
		})
	}
}

// TestStoreContractOneWinner: writers racing with one generation: one
// stores it, every other gets ErrStaleGeneration.
func TestStoreContractOneWinner(t *testing.T) {
	for kind, s := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			name := owner1 + "/" + key64
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() { errs[i] = put(t, s, name, 5, "writer "+string(rune('a'+i))) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, pool.ErrStaleGeneration):
					t.Fatalf("loser's error: %v", err)
				}
			}
			if gen, body, err := read(t, s, name); won != 1 || err != nil || gen != 5 || !strings.HasPrefix(body, "writer ") {
				t.Fatalf("%d winners; stored %d %q %v", won, gen, body, err)
			}
		})
	}
}
