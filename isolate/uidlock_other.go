//go:build !unix

package isolate

import (
	"errors"
	"io"
	"time"
)

// errUIDHeld: another daemon leases the uid (never, where kernels cannot
// run as other uids).
var errUIDHeld = errors.New("uid leased elsewhere")

// lockUID is unsupported where kernels do not run as uids of their own.
func lockUID(string, int) (io.Closer, error) { return nil, ErrUnsupported }

func uidLastUsed(string, int) time.Time { return time.Time{} }

func touchUID(string, int) {}
