package ckpts3_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/s3test"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/ckpts3"
)

// BenchmarkMoveOwner10MiB moves one owner holding 10 MiB of state from
// node A to node B through the S3 store (a real S3 protocol server on
// loopback; each node its own state dir and S3 client): A's drain saves
// it (Close: pickle in the kernel, upload), B's first cell for the owner
// restores it (download, unpickle) on a warm spare. Reported: the move
// (save + restore) per op, each half, and the floor measured in the same
// run: B's first cell for an owner with nothing to restore.
func BenchmarkMoveOwner10MiB(b *testing.B) {
	testenv.RequirePython(b)
	b.Run("s3", func(b *testing.B) {
		srv := s3test.StartTLS(b, "fleet")
		env := srv.Env()
		benchMove(b, func() pool.CheckpointStore {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := ckpts3.Open(ctx, ckpts3.Config{URL: "s3://fleet/ckpt", Transport: srv.Transport, Getenv: func(k string) string { return env[k] }})
			if err != nil {
				b.Fatal(err)
			}
			return st
		})
	})
	// The floor: one local store both pools share (no network).
	b.Run("local", func(b *testing.B) {
		st, err := pool.NewLocalCheckpointStore(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		benchMove(b, func() pool.CheckpointStore { return st })
	})
}

func benchMove(b *testing.B, store func() pool.CheckpointStore) {
	node := func(spares int) *pool.Pool {
		st := store()
		p, err := pool.New(pool.Config{
			StateDir: b.TempDir(), DefaultInterpreter: testenv.Python, Logger: hclog.NewNullLogger(),
			Policies:    map[string]pool.CellPolicy{"default": {Persist: true}},
			Warm:        map[string]pool.Warm{"default": {Spares: spares}},
			Checkpoints: pool.CheckpointConfig{Store: st, Idle: -1},
		})
		if err != nil {
			b.Fatal(err)
		}
		if spares > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.WaitSpares(ctx, "default", spares); err != nil {
				b.Fatal(err)
			}
		}
		return p
	}
	exec := func(p *pool.Pool, owner, code, want string) {
		res, err := p.Execute(context.Background(), pool.Request{Owner: owner, Code: code})
		if err != nil || res.Output != want {
			b.Fatalf("%s: %+v %v", owner, res, err)
		}
	}
	var save, restore, floor time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a, dst := node(0), node(2)
		exec(a, "mover", "import os\nstate = os.urandom(10 << 20)\nlen(state)", "10485760\n")
		t0 := time.Now()
		exec(dst, "fresh", "1", "1\n") // the floor: a spare, nothing to restore
		floor += time.Since(t0)
		b.StartTimer()

		t0 = time.Now()
		if err := a.Close(context.Background()); err != nil { // A's drain saves the owner
			b.Fatal(err)
		}
		t1 := time.Now()
		exec(dst, "mover", "len(state)", "10485760\n") // B restores it
		save, restore = save+t1.Sub(t0), restore+time.Since(t1)

		b.StopTimer()
		dst.ShutdownOwner("mover") // the next round starts from nothing
		if err := dst.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64((save+restore).Milliseconds())/n, "move-ms/op")
	b.ReportMetric(float64(save.Milliseconds())/n, "save-ms/op")
	b.ReportMetric(float64(restore.Milliseconds())/n, "restore-ms/op")
	b.ReportMetric(float64(floor.Milliseconds())/n, "floor-firstcell-ms/op")
}

// BenchmarkStorePutGet10MiB is the store's own share of a move: one
// 10 MiB generation written from a spool file and read back as a stream,
// over TLS to the S3 server on loopback, and (the floor, same run) the
// local store.
func BenchmarkStorePutGet10MiB(b *testing.B) {
	srv := s3test.StartTLS(b, "fleet")
	env := srv.Env()
	s3, err := ckpts3.Open(context.Background(), ckpts3.Config{URL: "s3://fleet/ckpt", Transport: srv.Transport, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		b.Fatal(err)
	}
	local, err := pool.NewLocalCheckpointStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	spool := filepath.Join(b.TempDir(), "spool")
	if err := os.WriteFile(spool, bytes.Repeat([]byte{7}, 10<<20), 0o600); err != nil {
		b.Fatal(err)
	}
	for name, st := range map[string]pool.CheckpointStore{"s3": s3, "local": local} {
		gen := uint64(0) // outside b.Run: -count reruns the sub-benchmark on the same store
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				gen++
				f, err := os.Open(spool)
				if err != nil {
					b.Fatal(err)
				}
				err = st.Put(ctx, owner1+"/"+key64, gen, f, 10<<20)
				_ = f.Close()
				if err != nil {
					b.Fatal(err)
				}
				obj, e, err := st.Get(ctx, owner1+"/"+key64)
				if err != nil || e.Generation != gen {
					b.Fatalf("get %d: %+v %v", gen, e, err)
				}
				n, err := io.Copy(io.Discard, obj)
				_ = obj.Close()
				if err != nil || n != 10<<20 {
					b.Fatalf("read %d: %v", n, err)
				}
			}
			b.SetBytes(10 << 20)
		})
	}
}
