//go:build darwin || freebsd

package rpcsock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCredSupported: macOS and FreeBSD have LOCAL_PEERCRED (what
// getpeereid(3) reads).
const peerCredSupported = true

// peerUID reads the peer's effective uid at connect time (LOCAL_PEERCRED).
// It reads no data from the connection.
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("rpcsock: peer credentials: not a unix socket: %w", ErrUnsupported)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("rpcsock: peer credentials: %w", err)
	}
	var cred *unix.Xucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return -1, fmt.Errorf("rpcsock: peer credentials: %w", err)
	}
	if credErr != nil {
		return -1, fmt.Errorf("rpcsock: peer credentials: LOCAL_PEERCRED: %w", credErr)
	}
	return int(cred.Uid), nil
}
