package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool"
)

// Defaults of Config's zero fields.
const (
	// DefaultMaxSize rotates the file once it would exceed 100 MiB.
	DefaultMaxSize = 100 << 20
	// DefaultKeep is how many rotated files (PATH.1 ... PATH.N) are kept.
	DefaultKeep = 5
	// queueLen bounds the lines waiting for the writer.
	queueLen = 4096
)

// ErrClosed: the log was closed.
var ErrClosed = errors.New("audit: closed")

// Config configures the audit log.
type Config struct {
	// Path is the log file (created 0600, appended to).
	Path string
	// IncludeCode stores each cell's code, not only its size and SHA-256.
	IncludeCode bool
	// MaxSize rotates the file before it would grow past this many bytes
	// (default 100 MiB).
	MaxSize int64
	// Keep is how many rotated files to keep: PATH.1 is the newest
	// (default 5).
	Keep int
	// OnFailure is called once per line that could not be written.
	OnFailure func()
	// Logger receives the first failure of each run of failures.
	Logger hclog.Logger
}

// Record is one line of the audit log.
type Record struct {
	Time       time.Time      `json:"time"`
	Owner      string         `json:"owner"`
	KernelID   string         `json:"kernel_id,omitempty"`
	UID        int            `json:"uid"`
	Mode       string         `json:"mode"`
	CodeBytes  int            `json:"code_bytes"`
	CodeSHA256 string         `json:"code_sha256"`
	Code       *string        `json:"code,omitempty"`
	Status     pool.Status    `json:"status"`
	Duration   string         `json:"duration"`
	Seconds    float64        `json:"duration_seconds"`
	ExitCode   int            `json:"exit_code"`
	OOMKilled  bool           `json:"oom_killed"`
	ToolCalls  map[string]int `json:"tool_calls"`
	Output     int64          `json:"output_bytes"`
	Redactions int            `json:"redactions"`
}

// Log is an open audit log. It implements pool.Observer.
type Log struct {
	cfg   Config
	log   hclog.Logger
	queue chan []byte
	done  chan struct{}

	mu      sync.Mutex
	closed  bool
	failing bool // a failure was logged and no write succeeded since
	// rotFailing: a rotation failure was logged and none succeeded since.
	rotFailing bool
	file       *rotator
}

var _ pool.Observer = (*Log)(nil)

// Open opens (creating 0600) the log file and starts its writer.
func Open(cfg Config) (*Log, error) {
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.OnFailure == nil {
		cfg.OnFailure = func() {}
	}
	r, err := openRotator(cfg.Path, cfg.MaxSize, cfg.Keep)
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	return start(cfg, r), nil
}

// start runs the writer of an opened file.
func start(cfg Config, r *rotator) *Log {
	l := &Log{cfg: cfg, log: cfg.Logger.Named("audit"), queue: make(chan []byte, queueLen), done: make(chan struct{}), file: r}
	go l.writer()
	return l
}

// NewRecord builds the line of one cell.
func NewRecord(ev *pool.CellEvent, includeCode bool) Record {
	sum := sha256.Sum256([]byte(ev.Code))
	r := Record{
		Time: ev.Time.UTC(), Owner: ev.Owner, KernelID: ev.KernelID, UID: ev.UID, Mode: ev.Mode,
		CodeBytes: len(ev.Code), CodeSHA256: hex.EncodeToString(sum[:]), Status: ev.Status,
		Duration: ev.Duration.Round(time.Millisecond).String(), Seconds: ev.Duration.Seconds(),
		ExitCode: ev.ExitCode, OOMKilled: ev.OOMKilled, ToolCalls: ev.ToolCalls,
		Output: ev.OutputBytes, Redactions: max(ev.Redactions, 0),
	}
	if r.ToolCalls == nil {
		r.ToolCalls = map[string]int{}
	}
	if includeCode {
		code := ev.Code
		r.Code = &code
	}
	return r
}

// CellDone queues the cell's line; a full queue counts as a failure.
func (l *Log) CellDone(ev *pool.CellEvent) {
	b, err := json.Marshal(NewRecord(ev, l.cfg.IncludeCode))
	if err != nil {
		l.fail(fmt.Errorf("encode: %w", err))
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.failLocked(ErrClosed)
		return
	}
	select {
	case l.queue <- b:
	default:
		l.failLocked(errors.New("the write queue is full (the disk is too slow)"))
	}
}

// writer appends queued lines until Close.
func (l *Log) writer() {
	defer close(l.done)
	for b := range l.queue {
		rotErr, err := l.file.write(b)
		l.mu.Lock()
		switch {
		case err != nil:
			l.failLocked(err)
		case l.failing:
			l.failing = false
			l.log.Info("audit log writes succeed again", "path", l.cfg.Path)
		}
		if rotErr != nil && !l.rotFailing {
			l.log.Error("audit log rotation failed; lines go on into the current file", "path", l.cfg.Path, "error", rotErr)
		}
		l.rotFailing = rotErr != nil
		l.mu.Unlock()
	}
}

func (l *Log) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failLocked(err)
}

// failLocked counts a lost line and logs the first of a run of failures.
func (l *Log) failLocked(err error) {
	l.cfg.OnFailure()
	if !l.failing {
		l.failing = true
		l.log.Error("audit log write failed; cells keep running, lost lines are counted in kernpool_audit_write_failures_total",
			"path", l.cfg.Path, "error", err)
	}
}

// Close writes what is queued and closes the file. Idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	l.mu.Unlock()
	<-l.done
	return l.file.close()
}

// The rest of pool.Observer: the audit log records cells only.

// KernelStarted implements pool.Observer (no line).
func (*Log) KernelStarted(string) {}

// KernelEnded implements pool.Observer (no line).
func (*Log) KernelEnded(string, pool.EndReason) {}

// SpawnFailed implements pool.Observer (no line).
func (*Log) SpawnFailed(string) {}

// Refused implements pool.Observer (no line: nothing ran).
func (*Log) Refused(string, pool.Refusal) {}
