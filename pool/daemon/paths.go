package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// stateLockName is the lock file that makes one daemon own a state dir
// (flock, held while the daemon lives; cgroup parents marked by a state
// dir whose lock is free are stale and adopted).
const stateLockName = ".kernpool.lock"

// DefaultSocket is $KERNPOOL_SOCKET, else /run/kernpool/kernpool.sock for
// root, else $XDG_RUNTIME_DIR/kernpool/kernpool.sock, else
// <tmp>/kernpool-<uid>/kernpool.sock (docs/design.md "State directory").
func DefaultSocket(getenv func(string) string) string {
	if s := getenv("KERNPOOL_SOCKET"); s != "" {
		return s
	}
	return filepath.Join(defaultBase(getenv), "kernpool.sock")
}

// DefaultStateDir is the state dir beside the default socket
// (DefaultSocket, so $KERNPOOL_SOCKET moves both).
func DefaultStateDir(getenv func(string) string) string {
	return StateDirBeside(DefaultSocket(getenv))
}

// StateDirBeside is the default state dir of a daemon serving on socket:
// "state" in the socket's directory.
func StateDirBeside(socket string) string {
	return filepath.Join(filepath.Dir(socket), "state")
}

func defaultBase(getenv func(string) string) string {
	return baseFor(getenv, runtime.GOOS, os.Getuid())
}

// baseFor is defaultBase for a given OS and uid (tests run as root).
func baseFor(getenv func(string) string, goos string, uid int) string {
	switch {
	case goos != "windows" && uid == 0:
		return "/run/kernpool"
	case getenv("XDG_RUNTIME_DIR") != "":
		return filepath.Join(getenv("XDG_RUNTIME_DIR"), "kernpool")
	case uid >= 0:
		return filepath.Join(os.TempDir(), fmt.Sprintf("kernpool-%d", uid))
	}
	// Windows has no uid; the user's temp dir is already private.
	return filepath.Join(os.TempDir(), "kernpool")
}
