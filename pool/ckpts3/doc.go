// Package ckpts3 is the S3 adapter of pool.CheckpointStore: checkpoints
// in a bucket of Amazon S3 or of any S3-compatible server (MinIO, Ceph,
// Garage, ...), through github.com/minio/minio-go/v7, so that every
// daemon configured with the same checkpoint_store can restore an owner
// another daemon saved (docs/design.md, "Checkpoint store").
//
// Each generation is its own object, <prefix>/<name>/<generation, 20
// digits>.ckpt, written with If-None-Match: * (the server refuses a second
// write of one generation), and a Put that finds a newer generation
// listed stores nothing. Readers take the newest generation listed, so an
// older generation written late is never what a restore loads, and the
// next Put removes it.
package ckpts3
