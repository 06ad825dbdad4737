//go:build linux

package api_test

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
)

// epollWatch is a hang-up watch with no read per request: one epoll set
// shared by all connections, waited on by one goroutine, with each
// running request's socket in it for EPOLLRDHUP only (a pipelined next
// request, EPOLLIN, wakes nothing). A request pays two epoll_ctl calls.
// A benchmark's instrument: a real one would tag events with a
// generation, since a socket number is reused after a close.
type epollWatch struct {
	epfd    int
	wake    *os.File // written at cleanup, ends the wait loop
	mu      sync.Mutex
	cancels map[int32]func()
}

func newEpollWatch(b testing.TB) hangUpWatch {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	e := &epollWatch{epfd: epfd, wake: w, cancels: map[int32]func(){}}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(r.Fd())}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(r.Fd()), &ev); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.loop(int32(r.Fd()))
	}()
	b.Cleanup(func() {
		_, _ = w.Write([]byte{0})
		<-done
		_ = syscall.Close(epfd)
		_ = r.Close()
		_ = w.Close()
	})
	return e.watch
}

// loop waits for hang-ups and cancels their requests until wakeFd fires.
func (e *epollWatch) loop(wakeFd int32) {
	events := make([]syscall.EpollEvent, 16)
	for {
		n, err := syscall.EpollWait(e.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == wakeFd {
				return
			}
			e.mu.Lock()
			cancel := e.cancels[ev.Fd]
			e.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
}

func (e *epollWatch) watch(c net.Conn, _ *bufio.Reader, cancel func()) func() {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return func() {}
	}
	var fd int32
	_ = raw.Control(func(f uintptr) {
		fd = int32(f)
		e.mu.Lock()
		e.cancels[fd] = cancel
		e.mu.Unlock()
		ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: fd}
		_ = syscall.EpollCtl(e.epfd, syscall.EPOLL_CTL_ADD, int(f), &ev)
	})
	return func() {
		_ = raw.Control(func(f uintptr) {
			_ = syscall.EpollCtl(e.epfd, syscall.EPOLL_CTL_DEL, int(f), nil)
		})
		e.mu.Lock()
		delete(e.cancels, fd)
		e.mu.Unlock()
	}
}

// TestSyncWatchesSeeHangUp holds the benchmark's synchronous server to
// its hang-up watches (else its figures would be those of a server that
// skips the work): a client that sends a request and goes away cancels
// the request's context while the handler runs.
func TestSyncWatchesSeeHangUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch func(testing.TB) hangUpWatch
	}{
		{"epoll", newEpollWatch},
		{"timer", func(testing.TB) hangUpWatch { return watchHangUp }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, canceled := make(chan struct{}), make(chan struct{})
			h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				close(started)
				<-r.Context().Done()
				close(canceled)
			})
			socket := syncHTTP(t, shortTempDir(t), "s.sock", h, tc.watch(t))
			c, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte("POST /x HTTP/1.1\r\nHost: k\r\nContent-Length: 0\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			recv(t, "the handler to start", started)
			_ = c.Close()
			recv(t, "the hang-up to cancel the request", canceled)
		})
	}
}
