package rpcsock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCredSupported: Linux has SO_PEERCRED.
const peerCredSupported = true

// peerUID reads the uid the peer had when it connected (SO_PEERCRED).
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
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, fmt.Errorf("rpcsock: peer credentials: %w", err)
	}
	if credErr != nil {
		return -1, fmt.Errorf("rpcsock: peer credentials: SO_PEERCRED: %w", credErr)
	}
	return int(cred.Uid), nil
}
