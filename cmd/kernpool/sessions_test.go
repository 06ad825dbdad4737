//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// TestSessionsCLI: sessions create (with --env NAME=VALUE and --env NAME
// from the CLI's own environment), exec --session with a cell-only --env,
// the tool-set rule's refusal, vars and interrupt --session, the listing,
// restart and delete.
func TestSessionsCLI(t *testing.T) {
	d := startServe(t)
	const planted = "from-the-cli-env-0123456789"
	cmd := exec.Command(binPath, "sessions", "create", "--socket", d.socket, "--owner", "alice",
		"--env", "GREETING=hello", "--env", "PLANTED_VALUE")
	cmd.Env = append(os.Environ(), "KERNPOOL_SOCKET=", "PLANTED_VALUE="+planted)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sessions create: %v\n%s", err, errb.String())
	}
	id := strings.TrimSpace(out.String())
	if len(id) != 33 || id[0] != 's' {
		t.Fatalf("sessions create printed %q", out.String())
	}
	r := cli(t, "", "exec", "--socket", d.socket, "--session", id, "--env", "CELL_ONLY=yes",
		"import os\nx = 1\nprint(os.environ['GREETING'], os.environ['CELL_ONLY'], os.environ['PLANTED_VALUE'] == '"+planted+"', os.environ['PLANTED_VALUE'])")
	if r.code != 0 || r.stdout != "hello yes True ***\n" {
		t.Fatalf("exec --session: %+v", r)
	}
	r = cli(t, "", "exec", "--socket", d.socket, "--session", id, "import os\nprint(os.environ.get('CELL_ONLY'), x)")
	if r.code != 0 || r.stdout != "None 1\n" {
		t.Fatalf("the next cell: %+v", r)
	}
	r = cli(t, "", "exec", "--socket", d.socket, "--session", id, "--tools", "search", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "tool set [search] differs from the session's []") {
		t.Fatalf("another tool set: %+v", r)
	}
	r = cli(t, "", "exec", "--socket", d.socket, "--session", id, "--owner", "bob", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "no such session") {
		t.Fatalf("bob naming alice's session: %+v", r)
	}
	r = cli(t, "", "vars", "--socket", d.socket, "--session", id, "--json")
	var v pool.Variables
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || len(v.Variables) != 2 || v.Variables[1].Name != "x" {
		t.Fatalf("vars --session: %+v", r)
	}
	if r = cli(t, "", "interrupt", "--socket", d.socket, "--session", id); r.code != 1 || !strings.Contains(r.stderr, "runs no cell") {
		t.Fatalf("interrupt --session with no cell: %+v", r)
	}
	r = cli(t, "", "sessions", "--socket", d.socket, "--owner", "alice")
	if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "GREETING,PLANTED_VALUE") || strings.Contains(r.stdout, planted) {
		t.Fatalf("sessions: %+v", r)
	}
	if r = cli(t, "", "ps", "--socket", d.socket); r.code != 0 || !strings.Contains(r.stdout, "SESSION") || !strings.Contains(r.stdout, id) {
		t.Fatalf("ps: %+v", r)
	}
	if r = cli(t, "", "sessions", "restart", "--socket", d.socket, id); r.code != 0 || r.stdout != "restarted "+id+"\n" {
		t.Fatalf("sessions restart: %+v", r)
	}
	if r = cli(t, "", "exec", "--socket", d.socket, "--session", id, "print('x' in globals())"); r.stdout != "False\n" {
		t.Fatalf("after restart: %+v", r)
	}
	if r = cli(t, "", "sessions", "delete", "--socket", d.socket, id); r.code != 0 {
		t.Fatalf("sessions delete: %+v", r)
	}
	if r = cli(t, "", "sessions", "show", "--socket", d.socket, id); r.code != 1 || !strings.Contains(r.stderr, "no such session") {
		t.Fatalf("show a deleted session: %+v", r)
	}
	for _, args := range [][]string{
		{"sessions", "bogus"}, {"sessions", "show"}, {"sessions", "--tools", "a"},
		{"exec", "--env", "NOT_SET_ANYWHERE_XYZ", "1"}, {"vars", "--session", id, "--owner", "a"},
	} {
		if r = cli(t, "", append(args, "--socket", d.socket)...); r.code != 2 {
			t.Errorf("%q: %+v, want usage exit 2", args, r)
		}
	}
}
