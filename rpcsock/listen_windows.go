//go:build windows

package rpcsock

import (
	"fmt"
	"net"
)

// defaultNetwork is loopback TCP on Windows: the token is the only guard.
const defaultNetwork = "tcp"

// dirModeChecked: Windows reports no meaningful permission bits; the
// staging dir's ACL is the kernel package's business.
const dirModeChecked = false

// listenUnix is refused: Windows kernels use loopback TCP.
func (s *Server) listenUnix() error {
	return fmt.Errorf("listen unix: %w", ErrUnsupported)
}

// peerUID has no meaning for loopback TCP.
func peerUID(net.Conn) (int, error) {
	return -1, fmt.Errorf("peer credentials: %w", ErrUnsupported)
}
