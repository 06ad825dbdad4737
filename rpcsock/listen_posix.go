//go:build !windows

package rpcsock

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// defaultNetwork is a Unix socket on POSIX.
const defaultNetwork = "unix"

// dirModeChecked: POSIX permission bits are meaningful here.
const dirModeChecked = true

// maxSunPath is the portable limit of sockaddr_un.sun_path minus its NUL
// (104 on the BSDs and macOS, 108 on Linux).
const maxSunPath = 103

// listenUnix binds <Dir>/rpc.sock, makes it 0600 and hands it to the
// kernel's uid. The bind-then-chmod window is harmless: Dir is 0700.
func (s *Server) listenUnix() error {
	if !peerCredSupported {
		return fmt.Errorf("listen unix: no peer-credential check: %w", ErrUnsupported)
	}
	path := filepath.Join(s.cfg.Dir, SocketName)
	if len(path) > maxSunPath {
		return fmt.Errorf("listen unix: %s is %d bytes, limit %d: %w", path, len(path), maxSunPath, ErrPathTooLong)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen unix: %w", err)
	}
	// The server removes the file itself in Close, after every
	// connection is gone.
	ln.SetUnlinkOnClose(false)
	fail := func(op string, err error) error {
		_ = ln.Close()
		_ = os.Remove(path)
		return fmt.Errorf("listen unix: %s: %w", op, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fail("chmod", err)
	}
	if s.cfg.UID >= 0 && s.cfg.UID != os.Getuid() {
		if err := os.Lchown(path, s.cfg.UID, -1); err != nil {
			return fail("chown", err)
		}
	}
	s.ln = ln
	s.sockPath = path
	s.endpoint = path
	return nil
}
