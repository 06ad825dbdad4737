package ckpts3_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/kernpool/kernpool/internal/s3test"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/ckpts3"
)

// TestOpenRefuses: a store that is misconfigured or cannot be reached is
// an error at Open naming the problem (the daemon then does not start),
// never a store that falls back to local files.
func TestOpenRefuses(t *testing.T) {
	srv := s3test.Start(t, "ckpt")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	credFile := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(credFile, []byte("[other]\naws_access_key_id = k\naws_secret_access_key = s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noCreds := map[string]string{"AWS_ENDPOINT_URL": srv.URL, "HOME": t.TempDir()}
	for _, tc := range []struct {
		name, url string
		env       map[string]string
		allowHTTP bool
		want      error
		text      string
	}{
		{"http scheme", "http://ckpt/x", srv.Env(), true, ckpts3.ErrBadURL, "s3://bucket[/prefix]"},
		{"no bucket", "s3:///x", srv.Env(), true, ckpts3.ErrBadURL, ""},
		{"query", "s3://ckpt/x?region=y", srv.Env(), true, ckpts3.ErrBadURL, ""},
		{"dot-dot prefix", "s3://ckpt/a/../b", srv.Env(), true, ckpts3.ErrBadURL, "segment"},
		{"credentials in the URL", "s3://key:secret@ckpt/x", srv.Env(), true, ckpts3.ErrBadURL, ""},
		{"no credentials", "s3://ckpt/x", noCreds, true, ckpts3.ErrNoCredentials, "AWS_ACCESS_KEY_ID"},
		{"half a key", "s3://ckpt/x", with(srv.Env(), "AWS_SECRET_ACCESS_KEY", ""), true, ckpts3.ErrNoCredentials, "must both be set"},
		{"file without the profile", "s3://ckpt/x", with(noCreds, "AWS_SHARED_CREDENTIALS_FILE", credFile), true, ckpts3.ErrNoCredentials, `profile "default"`},
		{"plain http without the opt-out", "s3://ckpt/x", srv.Env(), false, ckpts3.ErrPlainHTTP, "checkpoint_store_allow_http"},
		{"missing bucket", "s3://nosuch/x", srv.Env(), true, ckpts3.ErrNoBucket, "s3://nosuch/x"},
		{"unreachable", "s3://ckpt/x", with(srv.Env(), "AWS_ENDPOINT_URL", closed), true, nil, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := ckpts3.Open(ctx, ckpts3.Config{URL: tc.url, AllowHTTP: tc.allowHTTP, Getenv: func(k string) string { return tc.env[k] }})
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) || s != nil {
				t.Fatalf("Open = %v, %v; want %v with %q", s, err, tc.want, tc.text)
			}
		})
	}
	// The profile the file has is taken.
	env := with(noCreds, "AWS_SHARED_CREDENTIALS_FILE", credFile)
	env["AWS_PROFILE"] = "other"
	if _, err := ckpts3.Open(context.Background(), ckpts3.Config{URL: "s3://ckpt/x", AllowHTTP: true, Getenv: func(k string) string { return env[k] }}); err != nil {
		t.Fatalf("credentials file: %v", err)
	}
}

func with(env map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range env {
		out[a] = b
	}
	out[k] = v
	return out
}

// TestS3LateOlderObjectIgnored: an older generation's object that lands
// after a newer one (a writer that listed before the newer one was
// written) is never what Get returns, and the next Put removes it; an
// object over the size bound is refused before it is read.
func TestS3LateOlderObjectIgnored(t *testing.T) {
	srv := s3test.Start(t, "ckpt")
	s := openS3(t, srv, "s3://ckpt/p")
	name := owner1 + "/" + key64
	if err := put(t, s, name, 9, "newer"); err != nil {
		t.Fatal(err)
	}
	raw, err := minio.New(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4("k", "s", ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	late := "p/" + name + "/00000000000000000008.ckpt"
	if _, err := raw.PutObject(ctx, "ckpt", late, strings.NewReader("older, late"), 11, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if gen, body, err := read(t, s, name); err != nil || gen != 9 || body != "newer" {
		t.Fatalf("Get = %d %q %v", gen, body, err)
	}
	if err := put(t, s, name, 10, "newest"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for o := range raw.ListObjectsIter(ctx, "ckpt", minio.ListObjectsOptions{Prefix: "p/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d objects after the next Put, want 1", n)
	}

	env := srv.Env()
	small, err := ckpts3.Open(ctx, ckpts3.Config{URL: "s3://ckpt/p", AllowHTTP: true, MaxObjectBytes: 3, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := small.Get(ctx, name); !errors.Is(err, ckpts3.ErrObjectTooBig) {
		t.Fatalf("oversized Get: %v", err)
	}
	// Objects under the prefix that this store did not write are skipped.
	if _, err := raw.PutObject(ctx, "ckpt", "p/"+owner1+"/junk", strings.NewReader("j"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 1 || l[0].Generation != 10 {
		t.Fatalf("list = %+v %v", l, err)
	}
	var _ pool.CheckpointStore = s
}
