// Package redistest starts a real redis-server (Debian's package) for
// tests, on a Unix socket in a private temp dir, with persistence off.
// A host without the binary skips the test, saying so.
package redistest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readyBound only stops a hung test: Start returns as soon as the server
// logs that it accepts connections.
const readyBound = 60 * time.Second

// Server is a running redis-server.
type Server struct {
	// URL is unix:///path/redis.sock, for redisreg.Open and fleet_redis.
	URL string
	cmd *exec.Cmd
}

// Start runs a fresh redis-server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("needs redis-server (Debian package redis-server; .ci/run installs it)")
	}
	// A short path: a Unix socket's name is capped at 107 bytes.
	dir, err := os.MkdirTemp("", "redis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "notice")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s := &Server{URL: "unix://" + sock, cmd: cmd}
	t.Cleanup(s.stop)
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			if !seen && strings.Contains(strings.ToLower(sc.Text()), "ready to accept connections") {
				seen = true
				ready <- true
			}
		}
		if !seen {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("redis-server exited before it accepted connections")
		}
	case <-time.After(readyBound):
		t.Fatalf("redis-server not ready after %v", readyBound)
	}
	return s
}

// stop kills the server this package started (by its own pid) and reaps it.
func (s *Server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Kill stops the server now (a Redis that went away); the test's
// cleanup then has nothing left to stop.
func (s *Server) Kill() { s.stop() }
