package api

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConns caps the daemon's concurrent client connections.
const DefaultMaxConns = 256

// refuseWriteTimeout bounds the write of the 503 to a refused connection.
const refuseWriteTimeout = 100 * time.Millisecond

// LimitConns returns ln serving at most max connections at once (0 means
// DefaultMaxConns). A connection over the cap is answered "503 Service
// Unavailable" with a JSON error body (code too_many_connections) and
// closed before anything of it is read, so slow or idle clients can hold
// no more than max connections and file descriptors.
func LimitConns(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultMaxConns
	}
	return &limitListener{Listener: ln, max: int64(max)}
}

// LimitConnsClose is LimitConns for a listener whose connections speak
// TLS: a connection over the cap is closed at once, unanswered (a 503
// would need a TLS handshake, which costs more than the refusal is worth
// and would let a flood hold the accept loop).
func LimitConnsClose(ln net.Listener, max int) net.Listener {
	l := LimitConns(ln, max).(*limitListener)
	l.closeOnly = true
	return l
}

type limitListener struct {
	net.Listener
	closeOnly bool
	max       int64
	active    atomic.Int64
	refused   atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.active.Add(-1)
		l.refused.Add(1)
		if l.closeOnly {
			_ = c.Close()
			continue
		}
		_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		_, _ = c.Write(l.refusal())
		_ = c.Close()
	}
}

// refusal is the raw HTTP answer to a connection over the cap.
func (l *limitListener) refusal() []byte {
	body := `{"error":"kernpool serves its maximum of ` + strconv.FormatInt(l.max, 10) +
		` client connections; retry later","code":"` + CodeTooManyConnections + `"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: " +
		retryAfterSeconds + "\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// limitedConn gives its slot back when closed (once).
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.active.Add(-1) })
	return c.Conn.Close()
}
