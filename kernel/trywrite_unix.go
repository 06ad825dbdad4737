//go:build unix

package kernel

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeWriter makes one write(2) attempt on a non-blocking pipe and never
// waits: a request the pipe takes at once (the runner reads each one
// before it answers) needs no wake-up for ctx's end (see Kernel.write).
type pipeWriter struct {
	rc syscall.RawConn
	fn func(uintptr) bool // bound once: no closure per request
	p  []byte
	n  int
}

// newPipeWriter is nil unless f is a non-blocking file in the poller.
func newPipeWriter(f *os.File) *pipeWriter {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblock := false
	if rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	}) != nil || !nonblock {
		return nil
	}
	w := &pipeWriter{rc: rc}
	w.fn = w.write
	return w
}

func (w *pipeWriter) write(fd uintptr) bool {
	n, err := unix.Write(int(fd), w.p)
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Write(int(fd), w.p)
	}
	w.n = max(n, 0)
	return true // one attempt: EAGAIN is the caller's to wait for
}

// tryWrite returns how much of p the pipe took at once (0 when nothing or
// on an error: the caller writes the rest its usual way and sees it).
func (w *pipeWriter) tryWrite(p []byte) int {
	if w == nil || len(p) == 0 {
		return 0
	}
	w.p, w.n = p, 0
	_ = w.rc.Write(w.fn)
	w.p = nil
	return w.n
}
