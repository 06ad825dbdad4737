package audit

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
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
	// maxPendingCode bounds the code the waiting cells keep alive (a cell
	// may carry 16 MiB); kickPendingCode of it wakes the writer early.
	maxPendingCode  = 64 << 20
	kickPendingCode = 8 << 20
	// flushInterval is how often the writer writes what waits; flushLines
	// waiting wake it early.
	flushLines    = 256
	flushInterval = 100 * time.Millisecond
)

// ErrClosed: the log was closed.
var ErrClosed = errors.New("audit log closed")

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
	cfg  Config
	log  hclog.Logger
	kick chan struct{} // wakes the writer early when flushLines are waiting
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the writer has written everything

	mu      sync.Mutex
	pending []pool.CellEvent // cells waiting for the writer, at most queueLen
	// pendingCode is the code those cells hold, at most maxPendingCode.
	pendingCode int
	closed      bool
	failing     bool // a failure was logged and no write succeeded since
	// rotFailing: a rotation failure was logged and none succeeded since.
	rotFailing bool
	file       *rotator
}

var _ pool.Observer = (*Log)(nil)

// Open opens (creating 0600) the log file and starts its writer.
func Open(cfg Config) (*Log, error) {
	cfg.MaxSize = cmp.Or(max(cfg.MaxSize, 0), DefaultMaxSize)
	cfg.Keep = cmp.Or(max(cfg.Keep, 0), DefaultKeep)
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.OnFailure == nil {
		cfg.OnFailure = func() {}
	}
	r, err := openRotator(cfg.Path, cfg.MaxSize, cfg.Keep)
	if err != nil {
		// The *PathError already reads "open PATH: ..."; a missing
		// directory is the usual cause, and the daemon does not create it
		// (its mode and owner are the operator's choice).
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("audit_log: the directory %s does not exist (create it, or point audit_log elsewhere): %w", filepath.Dir(cfg.Path), err)
		}
		return nil, fmt.Errorf("audit_log: %w", err)
	}
	return start(cfg, r), nil
}

// start runs the writer of an opened file.
func start(cfg Config, r *rotator) *Log {
	l := &Log{cfg: cfg, log: cfg.Logger.Named("audit"), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), file: r}
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

// CellDone queues the cell for the writer, which hashes and encodes it
// off the cell's path; a full queue counts as a failure. The event is
// copied (its strings and maps are not changed after the cell settled).
func (l *Log) CellDone(ev *pool.CellEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		l.failLocked(ErrClosed)
	case len(l.pending) >= queueLen || l.pendingCode+len(ev.Code) > maxPendingCode:
		l.failLocked(errors.New("the write queue is full (the disk is too slow)"))
	default:
		// No goroutine is woken per cell (that cost more than the rest of
		// the audit line); the writer comes by every flushInterval.
		l.pending = append(l.pending, *ev)
		l.pendingCode += len(ev.Code)
		if len(l.pending) == flushLines || l.pendingCode >= kickPendingCode {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	}
}

// writer writes the waiting lines every flushInterval (or as soon as
// flushLines wait), one write(2) per batch, until Close, then the rest.
func (l *Log) writer() {
	defer close(l.done)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	var spare []pool.CellEvent
	var lines [][]byte
	for {
		stopping := false
		select {
		case <-t.C:
		case <-l.kick:
		case <-l.stop:
			stopping = true
		}
		l.mu.Lock()
		batch := l.pending
		l.pending, l.pendingCode = spare, 0
		l.mu.Unlock()
		lines = l.flush(l.encode(batch, lines))
		clear(batch)
		spare = batch[:0]
		if stopping {
			return
		}
	}
}

// encode appends the JSON line of each event to lines[:0].
func (l *Log) encode(events []pool.CellEvent, lines [][]byte) [][]byte {
	lines = lines[:0]
	for i := range events {
		b, err := json.Marshal(NewRecord(&events[i], l.cfg.IncludeCode))
		if err != nil {
			l.fail(fmt.Errorf("encode: %w", err))
			continue
		}
		lines = append(lines, append(b, '\n'))
	}
	return lines
}

// flush writes a batch and reports its outcome; it returns the batch
// emptied (and cleared) for reuse.
func (l *Log) flush(batch [][]byte) [][]byte {
	if len(batch) == 0 {
		return batch
	}
	rotErr, lost, err := l.file.writeLines(batch)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		for range lost {
			l.failLocked(err)
		}
	case l.failing:
		l.failing = false
		l.log.Info("audit log writes succeed again", "path", l.cfg.Path)
	}
	if rotErr != nil && !l.rotFailing {
		l.log.Error("audit log rotation failed; lines go on into the current file", "path", l.cfg.Path, "error", rotErr)
	}
	l.rotFailing = rotErr != nil
	clear(batch)
	return batch[:0]
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
	close(l.stop)
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

// SparesChanged implements pool.Observer (no line: no owner's code ran).
func (*Log) SparesChanged(string, int) {}
