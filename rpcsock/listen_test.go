package rpcsock

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
)

func TestSocketModes(t *testing.T) {
	requireUnixSockets(t)
	s := listen(t, Config{Tools: []string{"t"}})
	dir := filepath.Dir(s.Endpoint())
	if s.Endpoint() != filepath.Join(dir, SocketName) {
		t.Fatalf("endpoint %q", s.Endpoint())
	}
	fi, err := os.Lstat(s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
	if len(s.Token()) != 43 || strings.ContainsAny(s.Token(), "+/=") {
		t.Errorf("token %d chars, want 43 url-safe", len(s.Token()))
	}
}

func TestListenRefusesBadConfig(t *testing.T) {
	requireUnixSockets(t)
	base := testTempDir(t)
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(privateDir(t), link); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(base, strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	good := privateDir(t)
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"empty dir", Config{}, ErrBadConfig},
		{"missing dir", Config{Dir: filepath.Join(base, "nope")}, ErrInsecureDir},
		{"group/other readable", Config{Dir: open}, ErrInsecureDir},
		{"file", Config{Dir: file}, ErrInsecureDir},
		{"symlink", Config{Dir: link}, ErrInsecureDir},
		{"path too long", Config{Dir: long}, ErrPathTooLong},
		{"bad network", Config{Dir: good, Network: "udp"}, ErrBadConfig},
		{"bad uid", Config{Dir: good, UID: -2}, ErrBadConfig},
		{"negative idle", Config{Dir: good, IdleTimeout: -1}, ErrBadConfig},
		{"empty tool", Config{Dir: good, Tools: []string{""}}, ErrBadToolName},
		{"tool with space", Config{Dir: good, Tools: []string{"a b"}}, ErrBadToolName},
		{"tool with newline", Config{Dir: good, Tools: []string{"a\n"}}, ErrBadToolName},
		{"tool too long", Config{Dir: good, Tools: []string{strings.Repeat("x", 129)}}, ErrBadToolName},
	}
	for _, tc := range tests {
		if tc.cfg.UID == 0 {
			tc.cfg.UID = -1
		}
		s, err := Listen(tc.cfg)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if s != nil {
			_ = s.Close()
		}
	}
	if entries, _ := os.ReadDir(good); len(entries) != 0 {
		t.Errorf("failed Listen left %v in the dir", entries)
	}
}

func TestCloseIdempotentRemovesSocket(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			if network == "unix" {
				requireUnixSockets(t)
			}
			dir := privateDir(t)
			s, err := Listen(Config{Dir: dir, UID: -1, Tools: []string{"t"}, Network: network})
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			end := s.BeginCell(pool.ToolHandlerFunc(func(ctx context.Context, _ pool.ToolCall) (string, error) {
				close(started)
				<-ctx.Done()
				return "", ctx.Err()
			}), 0)
			defer end()
			cl := newClient(t, s)
			idle := newClient(t, s)
			if _, err := cl.c.Write([]byte(req("t", nil, s.Token()) + "\n")); err != nil {
				t.Fatal(err)
			}
			<-started
			for range 2 {
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, SocketName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket still there: %v", err)
			}
			if _, err := io.ReadAll(idle.r); err != nil && !isReset(err) {
				t.Errorf("idle conn: %v", err)
			}
			if end() != 1 {
				t.Error("the running call was dispatched and must count")
			}
		})
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// TestIdleDropSendsNotice: an idle connection gets the idle notice and EOF;
// one with half a request pending gets EOF only (no notice, since the
// server read part of a request).
func TestIdleDropSendsNotice(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}, Network: "tcp", IdleTimeout: 50 * time.Millisecond})
	idle := newClient(t, s)
	got, err := io.ReadAll(idle.r)
	if err != nil || string(got) != idleNotice {
		t.Fatalf("idle: %q %v, want notice", got, err)
	}
	half := newClient(t, s)
	if _, err := half.c.Write([]byte(`{"tool":`)); err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(half.r)
	if err != nil || len(got) != 0 {
		t.Fatalf("half request: %q %v, want bare EOF", got, err)
	}
}

// TestMaxConns: connections beyond the cap get MsgTooManyConns and are
// closed unread; the ones within keep working.
func TestMaxConns(t *testing.T) {
	s := listen(t, Config{Tools: []string{"t"}, MaxConns: 2})
	end := s.BeginCell(&echo{}, 0)
	defer end()
	a, b := newClient(t, s), newClient(t, s)
	a.send(t, req("t", nil, s.Token()))
	b.send(t, req("t", nil, s.Token()))
	c := newClient(t, s)
	_, _ = c.c.Write([]byte(req("t", nil, s.Token()) + "\n"))
	r := bufio.NewReader(c.c)
	if line, err := r.ReadString('\n'); err != nil || line != `{"error":"`+MsgTooManyConns+`"}`+"\n" {
		t.Fatalf("third connection: %q %v, want the refusal", line, err)
	}
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("third connection was served: %q", line)
	}
	if got := a.send(t, req("t", nil, s.Token())); got["result"] == "" {
		t.Fatalf("first connection broke: %v", got)
	}
}
