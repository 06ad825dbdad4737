package kernel

import (
	"os"

	"golang.org/x/sys/unix"
)

// replyPipeSize is the stdout pipe's capacity: a 1 MiB reply then moves in
// one write and one read instead of sixteen 64 KiB round trips.
const replyPipeSize = 1 << 20

// growPipe enlarges a pipe's buffer where the system allows; failure (an
// unprivileged user above fs.pipe-max-size) only costs speed.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, replyPipeSize)
	})
}
