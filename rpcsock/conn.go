package rpcsock

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
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
		line, tooLong, partial, err := readLine(r, s.cfg.MaxLineBytes)
		if err != nil {
			s.endConn(c, err, partial)
			return
		}
		s.linesRead.Add(1)
		var reply []byte
		switch {
		case tooLong:
			reply = encodeReply("error", MsgInvalidPrefix+invalidTooLong)
		case len(bytes.TrimSpace(line)) == 0:
			continue // blank lines are keep-alives, as in the reference
		default:
			reply = s.handleLine(line)
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

// readLine reads one newline-terminated line of at most max bytes. A longer
// line is consumed and discarded (tooLong). partial reports whether any
// byte of an unfinished line was read when err is returned.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong, partial bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			partial = true
		}
		if !tooLong {
			if len(line)+len(chunk) > limit+1 { // +1: the newline itself
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			return line[:max(len(line)-1, 0)], tooLong, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, tooLong, partial, err
		}
	}
}
