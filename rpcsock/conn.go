package rpcsock

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// readBufSize is the per-connection read buffer; lines longer than this
// are assembled (up to MaxLineBytes) from several reads.
const readBufSize = 64 << 10

// noticeWriteTimeout bounds the write of the idle notice.
const noticeWriteTimeout = time.Second

// serveConn answers one connection's requests in order, one response line
// per request line, until the peer leaves, idles out or the server closes.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer s.untrack(c)
	defer c.Close()
	if s.sockPath != "" && !s.peerAllowed(c) {
		return
	}
	r := bufio.NewReaderSize(c, readBufSize)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		line, tooLong, partial, err := readLine(r, s.cfg.MaxLineBytes, &s.mem)
		if errors.Is(err, errOverBudget) {
			s.overBudget.Add(1)
			s.log.Warn("connection dropped: request memory budget exceeded", "budget", s.cfg.MemoryBudget)
			s.refuse(c, MsgOverBudget)
			return
		}
		if err != nil {
			s.endConn(c, err, partial)
			return
		}
		s.linesRead.Add(1)
		blank := !tooLong && len(bytes.TrimSpace(line)) == 0
		var reply []byte
		switch {
		case tooLong:
			reply = errorReply(MsgInvalidPrefix + invalidTooLong)
		case !blank:
			reply = s.handleLine(line)
		}
		s.mem.release(cap(line))
		if blank {
			continue // blank lines are keep-alives, as in the reference
		}
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if _, err := c.Write(reply); err != nil {
			s.log.Debug("reply write failed", "error", err)
			return
		}
	}
}

// peerAllowed checks the Unix peer's uid before a single byte is read; a
// foreign peer is logged and dropped.
func (s *Server) peerAllowed(c net.Conn) bool {
	uid, err := peerUID(c)
	if err != nil {
		s.refusedPeers.Add(1)
		s.log.Warn("peer refused: credentials unreadable", "error", err)
		return false
	}
	if uid != s.wantUID {
		s.refusedPeers.Add(1)
		s.log.Warn("peer refused: foreign uid", "peer_uid", uid, "kernel_uid", s.wantUID)
		return false
	}
	return true
}

// endConn finishes a connection whose read failed. An idle connection that
// has not sent any part of a next request gets the idle notice first, so
// that its client may safely resend a request that crossed the drop.
func (s *Server) endConn(c net.Conn, err error, partial bool) {
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() && errors.Is(err, os.ErrDeadlineExceeded) && !s.isClosed() {
		if !partial {
			_ = c.SetWriteDeadline(time.Now().Add(noticeWriteTimeout))
			_, _ = io.WriteString(c, idleNotice)
		}
		s.log.Debug("idle connection dropped", "partial_request", partial)
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("connection read failed", "error", err)
	}
}

// refuse writes msg as an error reply and closes c (the caller's defer
// closes it), without reading what c sent: the stub reads the reply
// before it would resend, and raises msg.
func (s *Server) refuse(c net.Conn, msg string) {
	_ = c.SetWriteDeadline(time.Now().Add(noticeWriteTimeout))
	_, _ = c.Write(errorReply(msg))
}

// readLine reads one newline-terminated line of at most limit bytes. A
// longer line is consumed and discarded (tooLong). The line's backing
// array grows only as bytes arrive, never past limit+1, and every growth
// is charged to mem; the caller releases cap(line) once it is done with
// it. A charge mem refuses returns errOverBudget (nothing stays charged).
// partial reports whether any byte of an unfinished line was read when
// err is returned.
func readLine(r *bufio.Reader, limit int, mem *memBudget) (line []byte, tooLong, partial bool, err error) {
	defer func() {
		if err != nil {
			mem.release(cap(line))
			line = nil
		}
	}()
	for {
		chunk, rerr := r.ReadSlice('\n')
		if len(chunk) > 0 {
			partial = true
		}
		if !tooLong {
			need := len(line) + len(chunk)
			switch {
			case need > limit+1: // +1: the newline itself
				mem.release(cap(line))
				tooLong, line = true, nil
			case need > cap(line):
				grown := min(max(2*cap(line), need, 512), limit+1)
				if !mem.charge(grown - cap(line)) {
					return line, tooLong, true, errOverBudget
				}
				line = append(make([]byte, 0, grown), line...)
				line = append(line, chunk...)
			default:
				line = append(line, chunk...)
			}
		}
		switch {
		case rerr == nil:
			if tooLong {
				return nil, true, false, nil
			}
			return line[:max(len(line)-1, 0)], false, false, nil
		case errors.Is(rerr, bufio.ErrBufferFull):
			continue
		default:
			return line, tooLong, partial, rerr
		}
	}
}

// errOverBudget: a line would pass the kernel's request memory budget.
var errOverBudget = errors.New("request memory budget exceeded")

// memBudget counts the request bytes a kernel's connections hold.
type memBudget struct {
	limit int64
	held  atomic.Int64
	peak  atomic.Int64
}

// charge records n more bytes held; false (nothing recorded) when that
// would pass the limit.
func (m *memBudget) charge(n int) bool {
	held := m.held.Add(int64(n))
	if held > m.limit {
		m.held.Add(-int64(n))
		return false
	}
	for p := m.peak.Load(); held > p && !m.peak.CompareAndSwap(p, held); p = m.peak.Load() {
	}
	return true
}

func (m *memBudget) release(n int) { m.held.Add(-int64(n)) }
