//go:build darwin || freebsd

package rpcsock

import "golang.org/x/sys/unix"

// peerCredSupported: macOS and FreeBSD have LOCAL_PEERCRED (what
// getpeereid(3) reads).
const peerCredSupported = true

// peerCredOption names the socket option in errors.
const peerCredOption = "LOCAL_PEERCRED"

// fdPeerUID reads the peer's effective uid at connect time (LOCAL_PEERCRED).
func fdPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
