package kernel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// redirectRequestPipe runs a cell that points every fd of the runner on
// the request pipe at a pipe of its own, which nobody writes. The runner's
// hang-up watcher, blocked in poll(2), still holds the old read end: the
// host's writes then block once the pipe is full. With close, a signal
// makes the watcher poll again (on the new pipe), so no reader is left and
// the host's writes fail at once; it returns once the host's end says so.
func redirectRequestPipe(t *testing.T, k *Kernel, close bool) {
	t.Helper()
	rc, err := k.stdin.SyscallConn() // not Fd(): that would make the pipe blocking
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if cerr := rc.Control(func(fd uintptr) { err = syscall.Fstat(int(fd), &st) }); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	code := "import os, signal, sys, threading\nr, w = os.pipe()\n" +
		"for fd in os.listdir('/proc/self/fd'):\n" +
		"    if os.path.exists('/proc/self/fd/' + fd) and os.readlink('/proc/self/fd/' + fd) == 'pipe:[" + strconv.FormatUint(st.Ino, 10) + "]':\n" +
		"        os.dup2(r, int(fd))\n"
	if !close {
		// Keep a reader that never reads: a reader thread that was in
		// read(2) on the pipe returns with the host's next bytes and then
		// reads the new pipe, and the host's pipe, left with no reader,
		// would fail the write (EPIPE) instead of filling up.
		code = strings.Replace(code, "        os.dup2(r, int(fd))\n", "        os.dup(int(fd)); os.dup2(r, int(fd))\n", 1)
	}
	if close {
		code += "signal.signal(signal.SIGUSR1, lambda s, f: None)\n" +
			"for ident in sys._current_frames():\n" +
			"    if ident != threading.get_ident():\n" +
			"        signal.pthread_kill(ident, signal.SIGUSR1)"
	}
	mustExec(t, k, code)
	if !close {
		return
	}
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
}

// A cell closed the runner's end of the request pipe: the next request's
// write fails at once while Exec's context is alive. That is the kernel
// closing its stdin, a protocol error once the grace passes, not a
// cancellation.
func TestRequestPipeClosedByTheKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	redirectRequestPipe(t, k, true)
	err := execErr(t, k, context.Background(), "1", ErrProtocol)
	if !strings.Contains(err.Error(), "closed its stdout or stdin") {
		t.Fatalf("error %q does not say the kernel closed its stdin", err)
	}
}

// A restore's blob written to a closed request pipe fails while ctx is
// alive: the kernel is closed (and killed, the pipe is useless), not
// canceled.
func TestCheckpointRestoreToAClosedRequestPipe(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	redirectRequestPipe(t, k, true)
	_, err := k.RestoreCheckpoint(context.Background(), strings.NewReader("blob"), 4, 0)
	if !errors.Is(err, ErrClosed) || errors.Is(err, ErrCanceled) || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("err = %v, want ErrClosed for the broken pipe", err)
	}
	<-k.Done()
}

// A restore whose reader ends early is padded with zeros; when the kernel
// stopped reading, the padding's write blocks until ctx ends (here once
// the request pipe is full), which kills the kernel (its request pipe is
// mid-blob): a cancellation, not a short read that would leave the kernel
// out of step.
func TestCheckpointRestorePaddingCutByTheContext(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	redirectRequestPipe(t, k, false)
	rc, err := k.stdin.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // polling is fine in a test
		for {
			select {
			case <-k.Done():
				return
			default:
			}
			full := false
			_ = rc.Control(func(fd uintptr) {
				p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
				n, err := unix.Poll(p, 0)
				full = err == nil && n == 0
			})
			if full {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err = k.RestoreCheckpoint(ctx, strings.NewReader("abc"), 64<<20, 0)
	if !errors.Is(err, ErrCanceled) {
		t.Fatalf("err = %v, want ErrCanceled", err)
	}
	<-k.Done()
	if !errors.Is(k.Err(), ErrCanceled) {
		t.Fatalf("Err() = %v, want ErrCanceled", k.Err())
	}
}
