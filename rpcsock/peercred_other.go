//go:build !linux && !darwin && !freebsd && !windows

package rpcsock

import (
	"fmt"
	"net"
)

// peerCredSupported: no peer-credential facility wired up here, so Unix
// listeners are refused (fail closed) and callers must choose Network "tcp".
const peerCredSupported = false

func peerUID(net.Conn) (int, error) {
	return -1, fmt.Errorf("peer credentials: %w", ErrUnsupported)
}
