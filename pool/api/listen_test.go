//go:build unix

package api_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool/api"
)

func TestListenModes(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "new", "kp.sock")
	ln, err := api.Listen(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{filepath.Dir(path), api.SocketDirMode}, {path, api.SocketMode}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("%s mode %v, want %v", c.path, got, c.want)
		}
	}
}

func TestListenRefusesLiveDaemon(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "kp.sock")
	first, err := api.Listen(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := api.Listen(path, nil); !errors.Is(err, api.ErrAlreadyServing) {
		t.Fatalf("second Listen = %v, want ErrAlreadyServing", err)
	}
	// The live socket was left alone.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first daemon's socket was disturbed: %v", err)
	}
	conn.Close()
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "kp.sock")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close() // the file stays; nobody answers on it
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket file missing: %v", err)
	}
	ln, err := api.Listen(path, nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("closing the listener left the socket file: %v", err)
	}
}

func TestListenRefusesBadPaths(t *testing.T) {
	dir := shortTempDir(t)
	file := filepath.Join(dir, "regular")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path string }{
		{"regular file", file},
		{"parent is a file", filepath.Join(file, "kp.sock")},
		{"empty", ""},
		{"too long", filepath.Join(dir, strings.Repeat("s", 120))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := api.Listen(tt.path, nil)
			if err == nil {
				ln.Close()
				t.Fatalf("Listen(%q) succeeded", tt.path)
			}
		})
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Fatalf("Listen touched a regular file: %q, %v", b, err)
	}
}

func TestListenRefusesForeignSocketDir(t *testing.T) {
	testenv.RequireRoot(t) // gives a directory to another uid
	dir := filepath.Join(shortTempDir(t), "foreign")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ln, err := api.Listen(filepath.Join(dir, "kp.sock"), nil)
	if err == nil {
		ln.Close()
		t.Fatal("Listen accepted a socket dir owned by another user")
	}
	if !errors.Is(err, api.ErrSocket) || !strings.Contains(err.Error(), "65534") {
		t.Fatalf("error %v does not name the foreign owner", err)
	}
}

// A socket path of 107 bytes, the most bind(2) takes on Linux, is
// served; one byte more is refused as ErrSocket before any bind.
func TestListenPathLengthLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sun_path's length is Linux's here (macOS takes 103 bytes)")
	}
	dir := shortTempDir(t)
	for _, tc := range []struct {
		n  int
		ok bool
	}{{107, true}, {108, false}} {
		path := filepath.Join(dir, strings.Repeat("s", tc.n-len(dir)-1))
		ln, err := api.Listen(path, nil)
		if err == nil {
			ln.Close()
		}
		if (err == nil) != tc.ok || (!tc.ok && !errors.Is(err, api.ErrSocket)) {
			t.Errorf("a %d-byte socket path: %v, want served %v (else ErrSocket)", len(path), err, tc.ok)
		}
	}
}

// An existing socket dir that other users may list or write is kept as
// it is, with a warning; a private one (search permission for others
// included) is not warned about.
func TestListenWarnsOfAnOpenSocketDir(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o777, true}, {0o751, false}} {
		dir := filepath.Join(shortTempDir(t), "run")
		if err := os.Mkdir(dir, tc.mode); err != nil || os.Chmod(dir, tc.mode) != nil {
			t.Fatal(err)
		}
		var logs testenv.SyncBuffer
		ln, err := api.Listen(filepath.Join(dir, "kp.sock"), hclog.New(&hclog.LoggerOptions{Output: &logs}))
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if warned := strings.Contains(logs.String(), "socket directory is accessible to other users"); warned != tc.warn {
			t.Errorf("socket dir %v: warned %v, want %v (logs %q)", tc.mode, warned, tc.warn, logs.String())
		}
		if fi, err := os.Stat(dir); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != tc.mode {
			t.Errorf("socket dir %v: now %v, want it kept", tc.mode, fi.Mode().Perm())
		}
	}
}
