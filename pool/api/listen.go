package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Permissions of the daemon's socket and of a socket directory the daemon
// creates: only the daemon's user and group may connect.
const (
	SocketDirMode = 0o750
	SocketMode    = 0o660
)

// maxSocketPath is the longest socket path bind(2) takes on Linux
// (sun_path is 108 bytes with its NUL; macOS allows 103).
const maxSocketPath = 107

// Listen opens the daemon's Unix socket at path. It creates the directory
// (0750) when missing, refuses to start when a live daemon answers on
// path (ErrAlreadyServing), removes a stale socket nobody answers on,
// refuses a path that exists and is not a socket (ErrSocket), and makes
// the socket 0660. Closing the listener removes the socket file.
func Listen(path string, log hclog.Logger) (*net.UnixListener, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if path == "" {
		return nil, fmt.Errorf("listen: %w: empty path", ErrSocket)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w: %v", ErrSocket, err)
	}
	if len(abs) > maxSocketPath {
		return nil, fmt.Errorf("listen: %w: %s is %d bytes long; a Unix socket path may have at most %d", ErrSocket, abs, len(abs), maxSocketPath)
	}
	if err := ensureSocketDir(filepath.Dir(abs), log); err != nil {
		return nil, err
	}
	if err := clearStale(abs, log); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: abs, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", abs, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(abs, SocketMode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listen: chmod socket %s: %w", abs, err)
	}
	return ln, nil
}

func ensureSocketDir(dir string, log hclog.Logger) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, SocketDirMode); err != nil {
			return fmt.Errorf("listen: create socket dir: %w", err)
		}
		// MkdirAll honours the umask; set the exact mode we promise.
		if err := os.Chmod(dir, SocketDirMode); err != nil {
			return fmt.Errorf("listen: chmod socket dir: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("listen: socket dir: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("listen: %w: %s is not a directory", ErrSocket, dir)
	}
	if err := checkDirOwner(dir, fi); err != nil {
		return err
	}
	// An existing directory is the operator's: never chmod it, but say so
	// when other users can list or write it. Search permission alone (the
	// state dir's kernels may need to traverse it) reveals nothing, and the
	// socket itself stays 0660.
	if fi.Mode().Perm()&0o006 != 0 {
		log.Warn("socket directory is accessible to other users; the socket itself is 0660", "dir", dir, "mode", fi.Mode().Perm().String())
	}
	return nil
}

// clearStale removes a leftover socket at path if nothing answers on it.
func clearStale(path string, log hclog.Logger) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen: %w: %v", ErrSocket, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("listen: %w: %s exists and is not a socket", ErrSocket, path)
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = conn.Close()
		return fmt.Errorf("%w on %s", ErrAlreadyServing, path)
	}
	log.Info("removing stale socket", "path", path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("listen: remove stale socket: %w", err)
	}
	return nil
}
