package rpcsock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Server is one kernel's tool-RPC listener. Its methods are safe for
// concurrent use.
type Server struct {
	cfg      Config
	log      hclog.Logger
	ln       net.Listener
	endpoint string
	token    string
	sockPath string // "" for TCP
	idPrefix string
	wantUID  int // peer uid served on Unix sockets

	baseCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	nextID  atomic.Uint64

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	cur    *cell // the running cell's authority, nil between cells

	closeOnce sync.Once
	closeErr  error

	mem memBudget // request bytes all connections hold

	// Counters for tests and logs.
	refusedPeers atomic.Int64
	linesRead    atomic.Int64
	overBudget   atomic.Int64 // connections dropped by the memory budget
	overConns    atomic.Int64 // connections refused by MaxConns
}

// Listen opens the tool listener of one kernel: a 0600 Unix socket
// <Dir>/rpc.sock owned by cfg.UID (POSIX), or loopback TCP on an ephemeral
// port (Windows, or Network "tcp"), with a fresh 32-byte token.
func Listen(cfg Config) (*Server, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if err := checkDir(cfg.Dir); err != nil {
		return nil, err
	}
	token, err := randomText(32, base64.RawURLEncoding.EncodeToString)
	if err != nil {
		return nil, fmt.Errorf("listen: token: %w", err)
	}
	prefix, err := randomText(6, hex.EncodeToString)
	if err != nil {
		return nil, fmt.Errorf("listen: call ids: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger.Named("rpcsock"),
		token:    token,
		idPrefix: "call-" + prefix,
		wantUID:  cfg.UID,
		conns:    make(map[net.Conn]struct{}),
	}
	s.mem.limit = cfg.MemoryBudget
	if s.wantUID < 0 {
		s.wantUID = os.Getuid()
	}
	if cfg.Network == "tcp" {
		err = s.listenTCP()
	} else {
		err = s.listenUnix()
	}
	if err != nil {
		return nil, err
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	s.log.Debug("listening", "network", cfg.Network, "endpoint", s.endpoint, "tools", len(cfg.Tools))
	return s, nil
}

// randomText returns n random bytes rendered by enc.
func randomText(n int, enc func([]byte) string) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return enc(b), nil
}

// checkDir insists on a real directory without group/other permissions.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("staging dir: %w: %w", ErrInsecureDir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("staging dir %s is not a directory: %w", dir, ErrInsecureDir)
	}
	if fi.Mode().Perm()&0o077 != 0 && dirModeChecked {
		return fmt.Errorf("staging dir %s has mode %#o, want 0700: %w", dir, fi.Mode().Perm(), ErrInsecureDir)
	}
	return nil
}

func (s *Server) listenTCP() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen tcp: %w", err)
	}
	s.ln = ln
	s.endpoint = "tcp://" + ln.Addr().String()
	return nil
}

// Endpoint is what the kernel dials: the socket path, or tcp://127.0.0.1:PORT.
func (s *Server) Endpoint() string { return s.endpoint }

// Token is the kernel's RPC token (a secret: output redaction masks it).
func (s *Server) Token() string { return s.token }

// Tools is the kernel's tool set, sorted.
func (s *Server) Tools() []string { return append([]string(nil), s.cfg.Tools...) }

// acceptLoop serves each accepted connection on its own goroutine until the
// listener closes.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (EMFILE, ECONNABORTED): back off instead of spinning.
			s.log.Warn("accept failed", "error", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if full, ok := s.track(c); !ok {
			if full {
				s.overConns.Add(1)
				s.refuse(c, MsgTooManyConns)
			}
			_ = c.Close()
			continue
		}
		go s.serveConn(c)
	}
}

// track registers c; ok is false when the server is closed or full.
func (s *Server) track(c net.Conn) (full, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, false
	}
	if len(s.conns) >= s.cfg.MaxConns {
		s.log.Warn("connection refused: too many connections", "max", s.cfg.MaxConns)
		return true, false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return false, true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every live connection, cancels the
// context of every running tool call, waits for the serving goroutines and
// removes the socket file. Handlers must return once their context is
// canceled, since Close waits for them. Idempotent: later calls return the
// first call's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]net.Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		cur := s.cur
		s.cur = nil
		s.mu.Unlock()
		if cur != nil {
			s.retire(cur)
		}
		err := s.ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		for _, c := range conns {
			_ = c.Close()
		}
		s.cancel()
		s.wg.Wait()
		if s.sockPath != "" {
			if rmErr := os.Remove(s.sockPath); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
				err = rmErr
			}
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close: %w", err)
		}
		s.log.Debug("closed", "endpoint", s.endpoint)
	})
	return s.closeErr
}
