//go:build unix

package api_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool/api"
)

// fileCall is what a fake daemon saw of one files request.
type fileCall struct {
	uri, contentType, chunked string
	length, read              int64
}

// The file client's requests as they go on the wire: each target's path
// (a file path escaped as one segment, "." and "/" included, so that no
// HTTP layer cleans a ".." out of it), a query only when there is one, an
// upload's size announced as Content-Length (so the daemon refuses an
// oversized body before reading it), chunked when unknown, and a
// Content-Type on uploads only.
func TestFileClientRequests(t *testing.T) {
	var mu sync.Mutex
	var last fileCall
	var cc connCounter
	c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		last = fileCall{uri: r.Method + " " + r.RequestURI, contentType: r.Header.Get("Content-Type"),
			chunked: strings.Join(r.TransferEncoding, ","), length: r.ContentLength, read: n}
		mu.Unlock()
		switch {
		case r.Method == http.MethodPut:
			_, _ = fmt.Fprintf(w, `{"path":"p","bytes":%d}`+"\n", n)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.Contains(r.URL.Path, "/files/"):
			w.Header().Set("Content-Length", "4")
			_, _ = io.WriteString(w, "data")
		default:
			_, _ = io.WriteString(w, `{"dir":"","entries":[]}`+"\n")
		}
	})
	ctx := testCtx(t)
	kernel, owner, session := api.FileTarget{Kernel: "k1"}, api.FileTarget{Owner: "o/1", Mode: "m"}, api.FileTarget{Session: "s1"}
	// A reader of no known length: http.NewRequest would itself find a
	// *strings.Reader's, whatever the client announces.
	pattern := func(n int64) io.Reader { return testenv.NewPattern(n) }
	for _, tc := range []struct {
		name string
		call func() error
		want fileCall
	}{
		{"upload sized", func() error {
			_, err := c.UploadFile(ctx, kernel, "a b/../c.txt", pattern(5), 5)
			return err
		}, fileCall{uri: "PUT /v1/kernels/k1/files/a%20b%2F%2E%2E%2Fc%2Etxt", contentType: "application/octet-stream", length: 5, read: 5}},
		{"upload chunked", func() error {
			_, err := c.UploadFile(ctx, owner, "x", pattern(3), -1)
			return err
		}, fileCall{uri: "PUT /v1/owners/o%2F1/files/x?mode=m", contentType: "application/octet-stream", chunked: "chunked", length: -1, read: 3}},
		{"upload empty", func() error {
			_, err := c.UploadFile(ctx, session, "e", pattern(0), 0)
			return err
		}, fileCall{uri: "PUT /v1/sessions/s1/files/e", contentType: "application/octet-stream", length: 0}},
		{"download", func() error {
			_, err := c.DownloadFile(ctx, kernel, "d.bin", io.Discard)
			return err
		}, fileCall{uri: "GET /v1/kernels/k1/files/d%2Ebin"}},
		{"list", func() error {
			_, err := c.ListFiles(ctx, kernel, "")
			return err
		}, fileCall{uri: "GET /v1/kernels/k1/files"}},
		{"list dir", func() error {
			_, err := c.ListFiles(ctx, owner, "sub")
			return err
		}, fileCall{uri: "GET /v1/owners/o%2F1/files?dir=sub&mode=m"}},
		{"delete", func() error { return c.DeleteFile(ctx, session, "f") }, fileCall{uri: "DELETE /v1/sessions/s1/files/f"}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		got := last
		mu.Unlock()
		if got != tc.want {
			t.Errorf("%s: the daemon saw %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

var errDiskFull = errors.New("disk full")

type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, errDiskFull }

// A download into a writer that fails returns the writer's error (the
// caller's disk is full), not a short-body error of the daemon's; a
// download of the announced length returns it and no error; an answer
// with no announced length (chunked, as a proxy may send it) is taken
// whole, and OpenFile reports its size as -1.
func TestDownloadFileErrors(t *testing.T) {
	const data = "0123456789"
	var cc connCounter
	c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/kernels/k1/files/chunked" {
			_, _ = io.WriteString(w, data[:4])
			w.(http.Flusher).Flush() // the length is not known when the head goes
			_, _ = io.WriteString(w, data[4:])
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = io.WriteString(w, data)
	})
	ctx := testCtx(t)
	target := api.FileTarget{Kernel: "k1"}
	n, err := c.DownloadFile(ctx, target, "f", fullDisk{})
	if !errors.Is(err, errDiskFull) || errors.Is(err, io.ErrUnexpectedEOF) || n != 0 {
		t.Fatalf("download into a full disk: %d, %v; want 0 and the writer's error", n, err)
	}
	for _, path := range []string{"f", "chunked"} {
		var got strings.Builder
		if n, err := c.DownloadFile(ctx, target, path, &got); err != nil || n != 10 || got.String() != data {
			t.Fatalf("download %s: %d %q, %v; want 10 %q", path, n, got.String(), err, data)
		}
	}
	for path, want := range map[string]int64{"f": 10, "chunked": -1} {
		body, size, err := c.OpenFile(ctx, target, path)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		_ = body.Close()
		if size != want {
			t.Errorf("open %s: size %d, want %d", path, size, want)
		}
	}
}

// Over the network listener the file client sends its bearer token, and
// a credential reaches its own owner's files only: another owner's is
// 403 by owner and 404 by kernel id (as if it did not exist); no token is
// 401.
func TestFilesOverTheNetworkAreOwnerBound(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	alice, bob := d.exec(t, "alice", "1").Kernel.ID, d.exec(t, "bob", "1").Kernel.ID
	creds := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte("alice-token")): {Name: "alice", Owners: []string{"alice"}},
	}}
	client := networkClients(t, d, creds)
	ac, anon := client("alice-token"), client("")
	ctx := testCtx(t)
	if w, err := ac.UploadFile(ctx, api.FileTarget{Owner: "alice"}, "a.txt", strings.NewReader("hi"), 2); err != nil || w.Bytes != 2 {
		t.Fatalf("alice's upload: %+v, %v", w, err)
	}
	var got strings.Builder
	if n, err := ac.DownloadFile(ctx, api.FileTarget{Kernel: alice}, "a.txt", &got); err != nil || n != 2 || got.String() != "hi" {
		t.Fatalf("alice's download: %d %q, %v", n, got.String(), err)
	}
	if err := ac.DeleteFile(ctx, api.FileTarget{Kernel: alice}, "a.txt"); err != nil {
		t.Fatalf("alice's delete: %v", err)
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"bob's files by owner", func() error {
			_, err := ac.UploadFile(ctx, api.FileTarget{Owner: "bob"}, "x", strings.NewReader("x"), 1)
			return err
		}, http.StatusForbidden, api.CodeForbidden},
		{"bob's kernel by id", func() error {
			_, err := ac.ListFiles(ctx, api.FileTarget{Kernel: bob}, "")
			return err
		}, http.StatusNotFound, api.CodeNotFound},
		{"no token", func() error {
			_, err := anon.ListFiles(ctx, api.FileTarget{Owner: "alice"}, "")
			return err
		}, http.StatusUnauthorized, api.CodeUnauthorized},
	} {
		var ae *api.APIError
		if err := tc.call(); !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Code != tc.code {
			t.Errorf("%s: %v, want %d %s", tc.name, err, tc.status, tc.code)
		}
	}
}
