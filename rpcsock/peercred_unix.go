//go:build linux || darwin || freebsd

package rpcsock

import (
	"fmt"
	"net"
)

// peerUID reads the uid the peer had when it connected, through the
// platform's socket option (fdPeerUID). It reads no data from the connection.
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("peer credentials: not a unix socket: %w", ErrUnsupported)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("peer credentials: %w", err)
	}
	uid, credErr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { uid, credErr = fdPeerUID(int(fd)) }); err != nil {
		return -1, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return -1, fmt.Errorf("peer credentials: %s: %w", peerCredOption, credErr)
	}
	return uid, nil
}
