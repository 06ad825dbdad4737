package rpcsock

import (
	"cmp"
	"fmt"
	"sort"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// Defaults and fixed names of the wire contract.
const (
	// SocketName is the listener's file name inside the staging dir.
	SocketName = "rpc.sock"
	// StubName is the file name the generated module must be written under.
	StubName = "kernpool_tools.py"
	// DefaultIdleTimeout drops a connection that sent nothing for this long.
	DefaultIdleTimeout = 300 * time.Second
	// DefaultBudget is the per-cell tool-call budget when BeginCell gets <= 0.
	DefaultBudget = 50
	// DefaultMaxLine caps one request line (bytes, without the newline):
	// tool arguments are prompts, queries, paths and file snippets, not
	// bulk data.
	DefaultMaxLine = 1 << 20
	// DefaultMaxConns caps the live connections of one kernel: the stub
	// keeps one per thread that calls tools at the same time.
	DefaultMaxConns = 4
	// DefaultMemoryBudget caps the bytes of unfinished request lines one
	// kernel's connections hold together in the daemon (besides each
	// connection's fixed 64 KiB read buffer).
	DefaultMemoryBudget = 2 << 20
	// maxToolName caps a tool name in bytes.
	maxToolName = 128
)

// Config describes one kernel's tool listener.
type Config struct {
	// Dir is the kernel's staging dir. It must exist, be a real directory
	// and have no group or other permission bits (0700); the socket is
	// created inside it as rpc.sock.
	Dir string
	// UID is the kernel's uid: the socket is chowned to it and only peers
	// running as exactly this uid are served (root included: a root peer is
	// refused unless UID is 0). -1 means the daemon's own uid.
	UID int
	// Tools is the kernel's tool set. Calls naming any other tool are
	// refused. Order and duplicates do not matter.
	Tools []string
	// IdleTimeout drops a connection that sent nothing for this long
	// (0 = DefaultIdleTimeout). The kernpool_tools stub reconnects.
	IdleTimeout time.Duration
	// Logger receives the listener's logs (nil = no logging).
	Logger hclog.Logger
	// Network is "" (a Unix socket on POSIX, loopback TCP on Windows),
	// "unix" or "tcp" (loopback TCP, token-only guard; tests use it on
	// POSIX to prove the token-first order).
	Network string
	// MaxLineBytes caps one request line (0 = DefaultMaxLine). A longer
	// line is answered "Invalid RPC request: line too long" and skipped;
	// the connection stays usable.
	MaxLineBytes int
	// MaxConns caps simultaneous connections (0 = DefaultMaxConns); more
	// get MsgTooManyConns and are closed, unread.
	MaxConns int
	// MemoryBudget caps the request bytes all connections hold together
	// while they assemble lines (0 = DefaultMemoryBudget, at least
	// MaxLineBytes+1). A connection whose line would pass it gets
	// MsgOverBudget and is closed.
	MemoryBudget int64
}

// normalize validates cfg and returns a copy with defaults filled in and
// the tool set sorted and deduplicated.
func (cfg Config) normalize() (Config, error) {
	if cfg.Dir == "" {
		return cfg, fmt.Errorf("config: Dir is empty: %w", ErrBadConfig)
	}
	if cfg.UID < -1 {
		return cfg, fmt.Errorf("config: UID %d: %w", cfg.UID, ErrBadConfig)
	}
	if cfg.IdleTimeout < 0 || cfg.MaxLineBytes < 0 || cfg.MaxConns < 0 || cfg.MemoryBudget < 0 {
		return cfg, fmt.Errorf("config: negative limit: %w", ErrBadConfig)
	}
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.MaxLineBytes = cmp.Or(cfg.MaxLineBytes, DefaultMaxLine)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, DefaultMaxConns)
	cfg.MemoryBudget = cmp.Or(cfg.MemoryBudget, DefaultMemoryBudget)
	cfg.MemoryBudget = max(cfg.MemoryBudget, int64(cfg.MaxLineBytes)+1)
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	switch cfg.Network {
	case "":
		cfg.Network = defaultNetwork
	case "unix", "tcp":
	default:
		return cfg, fmt.Errorf("config: Network %q (want unix or tcp): %w", cfg.Network, ErrBadConfig)
	}
	tools, err := normalizeTools(cfg.Tools)
	if err != nil {
		return cfg, err
	}
	cfg.Tools = tools
	return cfg, nil
}

// normalizeTools validates each name and returns the sorted, deduplicated set.
func normalizeTools(in []string) ([]string, error) {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, name := range in {
		if err := ValidToolName(name); err != nil {
			return nil, err
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ValidToolName reports whether name can be a tool of a kernel's set: 1 to
// 128 bytes of UTF-8 without whitespace or control characters.
func ValidToolName(name string) error {
	if name == "" || len(name) > maxToolName || !utf8.ValidString(name) {
		return fmt.Errorf("tool name %q: %w", name, ErrBadToolName)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("tool name %q: %w", name, ErrBadToolName)
		}
	}
	return nil
}
