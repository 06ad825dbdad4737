//go:build unix

package api_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/memtest"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// Through the Go client, by kernel id and by owner: an upload the next
// cell reads, a cell's file downloaded byte-identical (1 MiB and 100 MiB,
// the process's peak RSS bounded), a listing and a delete.
func TestFilesOverTheAPI(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.Policies = map[string]pool.CellPolicy{"default": {FilesMaxBytes: 200 << 20, InterruptGrace: testenv.Patience}}
	}})
	ctx := testCtx(t)
	res := d.exec(t, "alice", "1")
	byID, byOwner := api.FileTarget{Kernel: res.Kernel.ID}, api.FileTarget{Owner: "alice"}
	for _, n := range []int64{1 << 20, 100 << 20} {
		var w *api.FileWritten
		var err error
		growth := memtest.PeakGrowth(t, func() { w, err = d.client.UploadFile(ctx, byOwner, "in dir/data.bin", testenv.NewPattern(n), n) })
		if err != nil || w.Bytes != n || w.Path != "in dir/data.bin" {
			t.Fatalf("upload of %d bytes: %+v, %v", n, w, err)
		}
		t.Logf("upload of %d MiB over the socket: peak RSS growth %.1f MiB", n>>20, float64(growth)/(1<<20))
		if growth > 24<<20 && !memtest.RaceEnabled {
			t.Fatalf("upload of %d bytes grew the peak RSS by %d", n, growth)
		}
		r := d.exec(t, "alice", "import hashlib, shutil\nshutil.copyfile('in dir/data.bin', 'out.bin')\n"+
			"h = hashlib.sha256()\nwith open('out.bin', 'rb') as f:\n    for b in iter(lambda: f.read(1 << 20), b''): h.update(b)\nprint(h.hexdigest())")
		if sum := testenv.PatternSum(n); strings.TrimSpace(r.Output) != sum {
			t.Fatalf("the cell read %q", r.Output)
		}
		h := sha256.New()
		growth = memtest.PeakGrowth(t, func() {
			got, err := d.client.DownloadFile(ctx, byID, "out.bin", h)
			if err != nil || got != n {
				t.Fatalf("download: %d bytes, %v", got, err)
			}
		})
		t.Logf("download of %d MiB over the socket: peak RSS growth %.1f MiB", n>>20, float64(growth)/(1<<20))
		if sum := testenv.PatternSum(n); hex.EncodeToString(h.Sum(nil)) != sum {
			t.Fatalf("download of %d bytes is not the cell's file", n)
		}
		if growth > 24<<20 && !memtest.RaceEnabled {
			t.Fatalf("download of %d bytes grew the peak RSS by %d", n, growth)
		}
	}
	l, err := d.client.ListFiles(ctx, byOwner, "in dir")
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "data.bin" || l.Entries[0].Type != pool.FileRegular || l.Dir != "in dir" {
		t.Fatalf("listing: %+v, %v", l, err)
	}
	if err := d.client.DeleteFile(ctx, byID, "in dir/data.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.DownloadFile(ctx, byID, "in dir/data.bin", io.Discard); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("download after delete: %v, want not_found", err)
	}
}

// Hostile requests over HTTP each get their status and code, and
// nothing is written: "..", an absolute path, NUL, an overlong name, an
// upload over files_max_bytes (announced or not), an owner with no
// kernel or with kernels of two modes.
func TestFilesAPIRefusals(t *testing.T) {
	const limit = 64 << 10
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.Policies = map[string]pool.CellPolicy{"default": {FilesMaxBytes: limit, InterruptGrace: testenv.Patience}}
	}})
	ctx := testCtx(t)
	res := d.exec(t, "bob", "import os\nos.mkdir('sub')")
	id := res.Kernel.ID
	base := "/v1/kernels/" + id + "/files/"
	d.expect(t, http.MethodPut, base+"%00x", "x", 400, api.CodeBadRequest, []string{"NUL"})
	d.expect(t, http.MethodPut, base+"sub%2F..%2F..%2Fescape", "x", 400, api.CodeBadRequest, []string{`".." component`})
	d.expect(t, http.MethodPut, base+"%2Fetc%2Fescape", "x", 400, api.CodeBadRequest, []string{"absolute"})
	d.expect(t, http.MethodPut, base+strings.Repeat("n", 256), "x", 400, api.CodeBadRequest, []string{"over the limit of 255"})
	d.expect(t, http.MethodGet, base+"missing", "", 404, api.CodeNotFound, []string{"no such file"})
	d.expect(t, http.MethodGet, base+"sub", "", 409, api.CodeNotRegular, []string{"it is a dir"})
	d.expect(t, http.MethodPut, base+"big", strings.Repeat("x", limit+1), 413, api.CodeTooLarge, []string{"65536", "files_max_bytes"})
	d.expect(t, http.MethodGet, "/v1/owners/nobody/files", "", 404, api.CodeNotFound, []string{"no live kernel"})
	// An unannounced (chunked) body over the limit is cut at limit+1.
	_, err := d.client.UploadFile(ctx, api.FileTarget{Kernel: id}, "big", testenv.NewPattern(10*limit), -1)
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 413 || ae.Code != api.CodeTooLarge {
		t.Fatalf("chunked oversize upload: %v, want 413 too_large", err)
	}
	// A raw ".." the mux cleans away reaches no file of the kernel.
	if st, _, _ := d.raw(t, http.MethodPut, base+"../../../escape", "x"); st == http.StatusOK {
		t.Fatal(`a PUT with ".." segments was written`)
	}
	l, err := d.client.ListFiles(ctx, api.FileTarget{Kernel: id}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name != "sub" && !strings.HasPrefix(e.Name, "_kernpool") && !strings.HasSuffix(e.Name, ".py") && e.Name != "tmp" {
			t.Errorf("a refused request left %q in the working dir", e.Name)
		}
	}
	d.exec(t, "bob", "1") // the default kernel
	if _, err := d.client.Execute(ctx, pool.Request{Owner: "bob", Mode: "other", Code: "1"}); err != nil {
		t.Fatal(err)
	}
	_, err = d.client.ListFiles(ctx, api.FileTarget{Owner: "bob"}, "")
	if !errors.As(err, &ae) || ae.Code != api.CodeConflict || !strings.Contains(ae.Message, "name the mode") {
		t.Fatalf("owner with two kernels: %v, want 409 conflict", err)
	}
	if _, err := d.client.ListFiles(ctx, api.FileTarget{Owner: "bob", Mode: "other"}, ""); err != nil {
		t.Fatalf("owner's kernel of mode other: %v", err)
	}
}

// An upload whose body stalls is ended by the server's body deadline with
// a 408 request_timeout, and nothing of it is kept.
func TestFilesStalledUploadIs408(t *testing.T) {
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.BodyReadTimeout = 200 * time.Millisecond }})
	id := d.exec(t, "stall", "1").Kernel.ID
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Three of the ten announced bytes, then nothing.
	if _, err := fmt.Fprintf(conn, "PUT /v1/kernels/%s/files/stalled HTTP/1.1\r\nHost: kernpool\r\nContent-Length: 10\r\n\r\nabc", id); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), api.CodeTimeout) {
		t.Fatalf("stalled upload: %d %s, want 408 %s", resp.StatusCode, body, api.CodeTimeout)
	}
	l, err := d.client.ListFiles(testCtx(t), api.FileTarget{Kernel: id}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name == "stalled" || strings.HasPrefix(e.Name, ".kernpool-upload-") {
			t.Fatalf("a stalled upload left %s", e.Name)
		}
	}
}

// A refused upload that announced a body closes the connection (the rest
// of the body is not read, whatever its size); one that announced none
// keeps it, and the next request on it is answered.
func TestFilesRefusedUploadConnection(t *testing.T) {
	const limit = 1 << 10
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.Policies = map[string]pool.CellPolicy{"default": {FilesMaxBytes: limit, InterruptGrace: testenv.Patience}}
	}})
	base := "/v1/kernels/" + d.exec(t, "conn", "1").Kernel.ID + "/files/"
	for _, tc := range []struct {
		name, path, body string
		status           int
		close            bool
	}{
		{"over the limit", "big", strings.Repeat("x", limit+1), http.StatusRequestEntityTooLarge, true},
		{"bad path with a body", "%00x", "x", http.StatusBadRequest, true},
		{"bad path without a body", "%00x", "", http.StatusBadRequest, false},
	} {
		conn, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		// The whole body is sent: a server that reads it finds it all.
		if _, err := fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: kernpool\r\nContent-Length: %d\r\n\r\n%s", base+tc.path, len(tc.body), tc.body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.status || resp.Close != tc.close {
			t.Errorf("%s: %d, Connection: close %v; want %d, %v", tc.name, resp.StatusCode, resp.Close, tc.status, tc.close)
		}
		if !resp.Close {
			if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: kernpool\r\n\r\n", strings.TrimSuffix(base, "/")); err != nil {
				t.Fatal(err)
			}
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("%s: the next request on the kept connection: %v, %v", tc.name, resp, err)
			}
		}
		_ = conn.Close()
	}
}
