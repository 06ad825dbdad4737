package fleet_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestRouterForwardsFiles: an owner's files, by owner and by kernel id,
// go through the router to the owner's node, streamed: an upload larger
// than the body the router keeps for a cell (16 MiB) arrives whole, and
// comes back the same.
func TestRouterForwardsFiles(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), acmeToken)
	ctx := context.Background()
	res := exec(t, r, "acme/f", "1")
	if ownerNode("acme/f", a, b) == nil {
		t.Fatal("acme/f runs on no node, or on both")
	}
	data := make([]byte, api.DefaultMaxBodyBytes+1<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	w, err := r.UploadFile(ctx, api.FileTarget{Owner: "acme/f"}, "in/data.bin", bytes.NewReader(data), int64(len(data)))
	if err != nil || w.Bytes != int64(len(data)) {
		t.Fatalf("upload through the router: %+v, %v", w, err)
	}
	got := exec(t, r, "acme/f", "import hashlib\nprint(hashlib.sha256(open('in/data.bin', 'rb').read()).hexdigest())")
	if strings.TrimSpace(got.Output) != hex.EncodeToString(sum[:]) {
		t.Fatalf("the kernel read %q, want the upload's digest", got.Output)
	}
	var back bytes.Buffer
	if n, err := r.DownloadFile(ctx, api.FileTarget{Kernel: res.Kernel.ID}, "in/data.bin", &back); err != nil || n != int64(len(data)) ||
		sha256.Sum256(back.Bytes()) != sum {
		t.Fatalf("download by kernel id through the router: %d bytes, %v", n, err)
	}
	l, err := r.ListFiles(ctx, api.FileTarget{Owner: "acme/f"}, "in")
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "data.bin" {
		t.Fatalf("list through the router: %+v, %v", l, err)
	}
	// A node's own answer reaches the client as it is.
	if _, err := r.DownloadFile(ctx, api.FileTarget{Kernel: res.Kernel.ID}, "nope", io.Discard); !errors.Is(err, pool.ErrNotFound) ||
		!strings.Contains(err.Error(), "nope") {
		t.Fatalf("a missing file through the router: %v", err)
	}
	if err := r.DeleteFile(ctx, api.FileTarget{Owner: "acme/f"}, "in/data.bin"); err != nil {
		t.Fatalf("delete through the router: %v", err)
	}
	// An owner with no kernel anywhere: 404, and nothing is placed.
	if _, err := r.ListFiles(ctx, api.FileTarget{Owner: "acme/none"}, ""); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("files of an owner with no kernel: %v", err)
	}
	if _, ok, _ := f.reg.Owner(ctx, "acme/none"); ok {
		t.Fatal("a files request placed its owner")
	}
}

// TestRouterForwardsSessions: a session created through the router
// lives on its owner's node; its cells, variables, files, listing and
// deletion go through the router to that node.
func TestRouterForwardsSessions(t *testing.T) {
	f := newFleet(t)
	f.node("a")
	f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), acmeToken)
	ctx := context.Background()
	s, err := r.CreateSession(ctx, pool.SessionSpec{Owner: "acme/s"})
	if err != nil {
		t.Fatalf("create a session through the router: %v", err)
	}
	for i, c := range []struct{ code, out string }{{"y = 5", ""}, {"y + 1", "6\n"}} {
		res, err := r.Execute(ctx, pool.Request{Session: s.ID, Code: c.code})
		if err != nil || res.Status != pool.StatusSuccess || res.Output != c.out {
			t.Fatalf("session cell %d through the router: %+v, %v", i, res, err)
		}
	}
	if v, err := r.SessionVariables(ctx, s.ID); err != nil || !slicesContainsVar(v, "y") {
		t.Fatalf("session variables through the router: %+v, %v", v, err)
	}
	if _, err := r.UploadFile(ctx, api.FileTarget{Session: s.ID}, "note.txt", strings.NewReader("hi"), 2); err != nil {
		t.Fatalf("session upload through the router: %v", err)
	}
	if res, err := r.Execute(ctx, pool.Request{Session: s.ID, Code: "print(open('note.txt').read())"}); err != nil || res.Output != "hi\n" {
		t.Fatalf("the session's kernel read %+v, %v", res, err)
	}
	list, err := r.Sessions(ctx, "")
	if err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Fatalf("sessions through the router: %+v, %v", list, err)
	}
	if err := r.DeleteSession(ctx, s.ID); err != nil {
		t.Fatalf("delete the session through the router: %v", err)
	}
	if _, err := r.Session(ctx, s.ID); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("the deleted session through the router: %v", err)
	}
}

func slicesContainsVar(v *pool.Variables, name string) bool {
	for _, x := range v.Variables {
		if x.Name == name {
			return true
		}
	}
	return false
}

// TestRouterFilesScoped: a token for acme/ reaches none of bob's files
// or sessions through the router: by owner 403, by kernel or session id
// 404 as for one that does not exist, and an upload writes nothing.
func TestRouterFilesScoped(t *testing.T) {
	f := newFleet(t)
	f.node("a")
	f.node("b")
	f.waitNodes(2)
	url := f.router()
	admin, acme := client(t, url, adminToken), client(t, url, acmeToken)
	ctx := context.Background()
	res := exec(t, admin, "bob", "open('secret.txt', 'w').write('bob only')")
	s, err := admin.CreateSession(ctx, pool.SessionSpec{Owner: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Execute(ctx, pool.Request{Session: s.ID, Code: "open('secret.txt', 'w').write('bob only')"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		t    api.FileTarget
		want error
	}{
		{"by owner", api.FileTarget{Owner: "bob"}, api.ErrForbidden},
		{"by kernel id", api.FileTarget{Kernel: res.Kernel.ID}, pool.ErrNotFound},
		{"by session id", api.FileTarget{Session: s.ID}, pool.ErrNotFound},
	} {
		if _, err := acme.DownloadFile(ctx, c.t, "secret.txt", io.Discard); !errors.Is(err, c.want) {
			t.Errorf("acme reads bob's file %s: %v, want %v", c.name, err, c.want)
		}
		if _, err := acme.ListFiles(ctx, c.t, ""); !errors.Is(err, c.want) {
			t.Errorf("acme lists bob's files %s: %v, want %v", c.name, err, c.want)
		}
		if _, err := acme.UploadFile(ctx, c.t, "planted.txt", strings.NewReader("x"), 1); !errors.Is(err, c.want) {
			t.Errorf("acme uploads to bob %s: %v, want %v", c.name, err, c.want)
		}
		if err := acme.DeleteFile(ctx, c.t, "secret.txt"); !errors.Is(err, c.want) {
			t.Errorf("acme deletes bob's file %s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := acme.Session(ctx, s.ID); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("acme reads bob's session: %v", err)
	}
	if _, err := acme.Execute(ctx, pool.Request{Session: s.ID, Code: "1"}); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("acme runs a cell in bob's session: %v", err)
	}
	if l, err := acme.Sessions(ctx, ""); err != nil || len(l) != 0 {
		t.Errorf("acme lists sessions %+v, %v; want none", l, err)
	}
	for _, tg := range []api.FileTarget{{Kernel: res.Kernel.ID}, {Session: s.ID}} {
		var got bytes.Buffer
		if _, err := admin.DownloadFile(ctx, tg, "secret.txt", &got); err != nil || got.String() != "bob only" {
			t.Errorf("bob's file after acme's attempts: %q, %v", got.String(), err)
		}
		if _, err := admin.DownloadFile(ctx, tg, "planted.txt", io.Discard); !errors.Is(err, pool.ErrNotFound) {
			t.Errorf("acme's upload landed in bob's kernel: %v", err)
		}
	}
	// An id that is a path is no path on the node.
	req, _ := http.NewRequest("GET", url+"/v1/kernels/..%2F..%2Fv1%2Fdrain/files/x", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a kernel id with a path through the router: %d, want 404", resp.StatusCode)
	}
}
