//go:build !windows

package rpcsock

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestForeignPeerRefusedBeforeRead: a peer whose uid is not the kernel's is
// closed before the server reads a byte. Two directions: the test process
// (root) against a kernel of uid 65534, and a process of uid 65534 against
// a kernel of the daemon's uid.
func TestForeignPeerRefusedBeforeRead(t *testing.T) {
	testenv.RequireRoot(t)
	requireUnixSockets(t)
	t.Run("root peer, kernel uid 65534", func(t *testing.T) {
		s := listen(t, Config{Tools: []string{"t"}, UID: 65534})
		h := &echo{}
		end := s.BeginCell(h, 0)
		defer end()
		cl := newClient(t, s)
		_, _ = cl.c.Write([]byte(req("t", nil, s.Token()) + "\n"))
		// A served peer gets its reply line (told at once, though the
		// server then holds the connection open); a refused one EOF or a
		// reset. The deadline only stops a hung server.
		_ = cl.c.SetReadDeadline(time.Now().Add(testenv.Patience))
		got, err := cl.r.ReadString('\n')
		if got != "" || (err != io.EOF && !isReset(err)) {
			t.Fatalf("foreign peer got %q (%v), want closed unanswered", got, err)
		}
		assertRefusedUnread(t, s, h)
	})
	t.Run("uid 65534 peer, kernel uid root", func(t *testing.T) {
		testenv.RequirePython(t)
		s := listen(t, Config{Tools: []string{"t"}, UID: -1})
		h := &echo{}
		end := s.BeginCell(h, 0)
		defer end()
		openPathForOthers(t, s.Endpoint())
		if res := dialAsNobody(t, s); res != "eof" && res != "reset" {
			t.Fatalf("foreign peer: %q, want eof or reset", res)
		}
		assertRefusedUnread(t, s, h)
	})
	t.Run("kernel-uid peer is served", func(t *testing.T) {
		testenv.RequirePython(t)
		s := listen(t, Config{Tools: []string{"t"}, UID: 65534})
		end := s.BeginCell(&echo{}, 0)
		defer end()
		openPathForOthers(t, filepath.Dir(s.Endpoint()))
		if res := dialAsNobody(t, s); res != "reply" {
			t.Fatalf("kernel-uid peer: %q, want reply", res)
		}
	})
}

// openPathForOthers lets other uids traverse to path (test only): the
// socket itself is opened only when it is the path's last element.
func openPathForOthers(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		path = filepath.Dir(path)
	}
	for dir := path; dir != filepath.Clean(os.TempDir()) && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// dialAsNobody connects to s from a python process of uid 65534, sends one
// good request and reports "reply", "eof" or "reset".
func dialAsNobody(t *testing.T, s *Server) string {
	t.Helper()
	script := `
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try:
    s.sendall(sys.argv[2].encode() + b"\n")
    data = s.recv(4096)
    print("reply" if data else "eof")
except ConnectionResetError:
    print("reset")
except BrokenPipeError:
    print("eof")
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Python, "-c", script, s.Endpoint(), req("t", nil, s.Token()))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("peer process: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// assertRefusedUnread checks the server counted one refused peer and read
// not one line, and that the handler never ran.
func assertRefusedUnread(t *testing.T, s *Server, h *echo) {
	t.Helper()
	if n := s.refusedPeers.Load(); n != 1 {
		t.Errorf("refused peers = %d, want 1", n)
	}
	if n := s.linesRead.Load(); n != 0 {
		t.Errorf("lines read = %d, want 0: the peer check must come first", n)
	}
	if n := h.calls.Load(); n != 0 {
		t.Errorf("handler ran %d times for a foreign peer", n)
	}
}

func TestSocketOwnedByKernelUID(t *testing.T) {
	testenv.RequireRoot(t)
	requireUnixSockets(t)
	const uid = 65534
	s := listen(t, Config{Tools: []string{"t"}, UID: uid})
	fi, err := os.Lstat(s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uid {
		t.Fatalf("socket owner %+v, want uid %d", fi.Sys(), uid)
	}
}
