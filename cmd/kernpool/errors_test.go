//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool/api"
)

// TestJSONErrors: with --json, a failed command prints one JSON object on
// stderr (and nothing on stdout): usage errors and a daemon that is not
// there alike.
func TestJSONErrors(t *testing.T) {
	missing := filepath.Join(testTempDir(t), "none.sock")
	for _, tc := range []struct {
		args []string
		code int
		hint string
	}{
		{[]string{"exec", "--json", "--socket", missing, "1"}, exitUsage, "Is the daemon running?"},
		{[]string{"exec", "--json", "a", "b"}, exitUsage, "Run 'kernpool exec --help' for usage."},
		{[]string{"ps", "--json", "--socket", missing}, exitUsage, "Is the daemon running?"},
		{[]string{"vars", "--json", "--socket", missing, "k1"}, exitUsage, "Is the daemon running?"},
	} {
		r := cli(t, "", tc.args...)
		var rep errorReport
		if err := json.Unmarshal([]byte(r.stderr), &rep); err != nil || r.code != tc.code || rep.ExitCode != tc.code ||
			!strings.HasPrefix(rep.Hint, tc.hint) || !strings.HasPrefix(rep.Error, "kernpool "+tc.args[0]+": ") || r.stdout != "" {
			t.Errorf("%q: %+v (%v), want exit %d and a JSON error with hint %q", tc.args, r, err, tc.code, tc.hint)
		}
	}
	// Without --json the same failure is two lines of text.
	if r := cli(t, "", "ps", "--socket", missing); strings.HasPrefix(r.stderr, "{") || strings.Count(r.stderr, "\n") != 2 {
		t.Errorf("ps without --json: %+v", r)
	}
}

// TestCapacityHintOnce: a capacity refusal prints the daemon's message and
// one retry hint from its Retry-After.
func TestCapacityHintOnce(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := fmt.Errorf("wrapped: %w", &api.APIError{StatusCode: 503, Code: api.CodeCapacity,
		Message: "execute: every live kernel is busy and the kernel cap is reached", RetryAfter: time.Second})
	if code := reportExecError(context.Background(), e, err); code != exitRetry ||
		out.String() != "kernpool exec: wrapped: execute: every live kernel is busy and the kernel cap is reached\nRetry in 1s.\n" {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}

// TestSocketPermissionHint: a socket this user may not open is not a
// daemon that is down: the hint says to join the socket's group.
func TestSocketPermissionHint(t *testing.T) {
	testenv.RequireRoot(t)                 // to run the CLI as another uid
	dir, err := os.MkdirTemp("", "kpperm") // t.TempDir's parent is closed to other uids
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "kp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	// The test binary's build dir is closed to other uids: run a copy.
	bin := filepath.Join(dir, "kernpool")
	data, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "ps", "--socket", sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", cliEnv + "=1"}
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err == nil || !strings.Contains(text, "permission denied") || !strings.Contains(text, "join the socket's group") || strings.Contains(text, "Is the daemon running") {
		t.Fatalf("ps on a socket this user may not open: %v\n%s", err, text)
	}
}
