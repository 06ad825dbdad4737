package rpcsock

import "golang.org/x/sys/unix"

// peerCredSupported: Linux has SO_PEERCRED.
const peerCredSupported = true

// peerCredOption names the socket option in errors.
const peerCredOption = "SO_PEERCRED"

// fdPeerUID reads the peer's uid at connect time (SO_PEERCRED).
func fdPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
