//go:build !unix

package daemon

// lockStateDir is a no-op where flock does not exist; the socket check
// still refuses a second daemon on the same socket.
func lockStateDir(string) (unlock func(), err error) {
	return func() {}, nil
}
