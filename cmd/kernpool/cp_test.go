//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// kernpool cp both ways, by owner, by --kernel and by --session, and its
// refusals with their exit codes: a copy in is read by the owner's (or
// session's) next cell, a file the cell wrote comes back byte-identical,
// a failed copy out leaves the local file as it was.
func TestCpBothWays(t *testing.T) {
	d := startServe(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "data.csv")
	data := bytes.Repeat([]byte("a,b,\x00\xff\n"), 200000) // 1.4 MB, binary
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "c", "open('out.bin', 'wb').write(bytes(range(256)) * 4096)"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if r := cli(t, "", "cp", "--socket", d.socket, in, "c:inputs/"); r.code != 0 {
		t.Fatalf("cp in: %+v", r)
	}
	r := cli(t, "", "exec", "--socket", d.socket, "--owner", "c", "import hashlib\nprint(len(open('inputs/data.csv', 'rb').read()))")
	if strings.TrimSpace(r.stdout) != "1400000" {
		t.Fatalf("the cell read %+v", r)
	}
	out := filepath.Join(dir, "out.bin")
	if r := cli(t, "", "cp", "--socket", d.socket, "c:out.bin", dir); r.code != 0 {
		t.Fatalf("cp out: %+v", r)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, bytes.Repeat(func() []byte {
		x := make([]byte, 256)
		for i := range x {
			x[i] = byte(i)
		}
		return x
	}(), 4096)) {
		t.Fatalf("downloaded %d bytes, %v", len(b), err)
	}
	if r := cli(t, "from stdin", "cp", "--socket", d.socket, "-", "c:s.txt"); r.code != 0 {
		t.Fatalf("cp from stdin: %+v", r)
	}
	client := api.NewClient(d.socket)
	defer client.CloseIdleConnections()
	id, err := kernelOf(t.Context(), client, "c", "")
	if err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "cp", "--socket", d.socket, "--kernel", id, ":s.txt", "-"); r.code != 0 || r.stdout != "from stdin" {
		t.Fatalf("cp --kernel to stdout: %+v", r)
	}
	sess, err := client.CreateSession(t.Context(), pool.SessionSpec{Owner: "c", Tools: []string{"search"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "early", "cp", "--socket", d.socket, "--session", sess.ID, "-", ":early.txt"); r.code != 1 || !strings.Contains(r.stderr, "no live kernel") {
		t.Fatalf("cp --session before its first cell: %+v, want exit 1 (idle)", r)
	}
	if r := cli(t, "", "exec", "--socket", d.socket, "--session", sess.ID, "1"); r.code != 0 {
		t.Fatalf("exec --session: %+v", r)
	}
	if r := cli(t, "", "cp", "--socket", d.socket, "--session", sess.ID, in, ":"); r.code != 0 {
		t.Fatalf("cp --session in: %+v", r)
	}
	r = cli(t, "", "exec", "--socket", d.socket, "--session", sess.ID, "_ = open('back.txt', 'w').write(str(len(open('data.csv', 'rb').read())))")
	if r.code != 0 {
		t.Fatalf("the session's cell: %+v", r)
	}
	if r := cli(t, "", "cp", "--socket", d.socket, "--session", sess.ID, ":back.txt", "-"); r.code != 0 || r.stdout != "1400000" {
		t.Fatalf("cp --session out: %+v", r)
	}
	if err := os.WriteFile(out, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing remote file", []string{"c:nope.bin", out}, 1, "no such file"},
		{"no such owner", []string{"nobody:x", out}, 1, "no live kernel"},
		{"dotdot", []string{in, "c:../escape"}, 2, `".."`},
		{"absolute", []string{in, "c:/etc/escape"}, 2, "absolute"},
		{"two locals", []string{in, out}, 2, "exactly one side"},
		{"two remotes", []string{"c:a", "c:b"}, 2, "exactly one side"},
		{"owner and --kernel", []string{"--kernel", id, in, "c:x"}, 2, "not both"},
		{"owner and --session", []string{"--session", sess.ID, in, "c:x"}, 2, "not both"},
		{"--kernel and --session", []string{"--kernel", id, "--session", sess.ID, in, ":x"}, 2, "not both"},
		{"--session and --mode", []string{"--session", sess.ID, "--mode", "m", in, ":x"}, 2, "--mode goes with OWNER:PATH"},
		{"unknown session", []string{"--session", "s0", ":x", out}, 1, "no such session"},
		{"one argument", []string{in}, 2, "expected a source"},
	} {
		r := cli(t, "", append([]string{"cp", "--socket", d.socket}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, r.code, r.stderr, c.code, c.want)
		}
	}
	if b, _ := os.ReadFile(out); string(b) != "kept" {
		t.Fatalf("a failed copy changed the local file to %d bytes", len(b))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".kernpool-cp-*")); len(m) != 0 {
		t.Fatalf("a failed copy left %v", m)
	}
}
