package kernel

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A cell closes the runner's end of the request pipe everywhere (its fds
// now name a pipe of its own, and the runner's hang-up watcher, woken by
// a signal, polls that one): the next request's write fails at once while
// Exec's context is alive. That is the kernel closing its stdin, a
// protocol error once the grace passes, not a cancellation.
func TestRequestPipeClosedByTheKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	rc, err := k.stdin.SyscallConn() // not Fd(): that would make the pipe blocking
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if cerr := rc.Control(func(fd uintptr) { err = syscall.Fstat(int(fd), &st) }); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	mustExec(t, k, "import os, signal, sys, threading\nr, w = os.pipe()\n"+
		"for fd in os.listdir('/proc/self/fd'):\n"+
		"    if os.path.exists('/proc/self/fd/' + fd) and os.readlink('/proc/self/fd/' + fd) == 'pipe:["+strconv.FormatUint(st.Ino, 10)+"]':\n"+
		"        os.dup2(r, int(fd))\n"+
		"signal.signal(signal.SIGUSR1, lambda s, f: None)\n"+
		"for ident in sys._current_frames():\n"+
		"    if ident != threading.get_ident():\n"+
		"        signal.pthread_kill(ident, signal.SIGUSR1)")
	// Wait (polling is fine in a test) until the host's end reports that
	// no reader is left.
	readerGone := func() bool {
		var revents int16
		_ = rc.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if n, err := unix.Poll(p, 0); n == 1 && err == nil {
				revents = p[0].Revents
			}
		})
		return revents&unix.POLLERR != 0
	}
	for end := time.Now().Add(testenv.Patience); !readerGone(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the request pipe still has a reader")
		}
	}
	err = execErr(t, k, context.Background(), "1", ErrProtocol)
	if !strings.Contains(err.Error(), "closed its stdout or stdin") {
		t.Fatalf("error %q does not say the kernel closed its stdin", err)
	}
}
