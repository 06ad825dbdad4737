package pool

import (
	"maps"
	"testing"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// The tests that use the real adapters (isolate, envscrub, rpcsock) are in
// package pool_test: those adapters import pool, so a test of package pool
// importing them would be an import cycle. This file gives them the
// package's test helpers (adapters_test.go names them as before).
var (
	NewTestPool       = newTestPool
	Run               = run
	WantStatus        = wantStatus
	WaitFor           = waitFor
	TestTempDir       = testTempDir
	SpareIDs          = spareIDs
	WaitSpares        = waitSpares
	WithWarm          = withWarm
	AssertStagingGone = assertStagingGone
	ErrNoToolHandler  = errNoToolHandler
)

// StateDirOf is the state dir p runs on.
func StateDirOf(p *Pool) string { return p.cfg.StateDir }

// The bounds on the request env values one kernel masks.
const (
	MaxMaskedEnv      = maxMaskedEnv
	MaxMaskedEnvBytes = maxMaskedEnvBytes
)

// StreamPartialAfter is how long the streamer holds a partial line.
const StreamPartialAfter = streamPartialAfter

// RealSandboxes builds a real isolate.Isolator and its state dir for this
// package's tests that need real confinement (cgroups, kernel uids):
// only package pool_test can import isolate, and it sets this.
var RealSandboxes func(t *testing.T) (SandboxFactory, string)

// newRealIsolator is RealSandboxes, failing clearly when it is unset.
func newRealIsolator(t *testing.T) (SandboxFactory, string) {
	t.Helper()
	if RealSandboxes == nil {
		t.Fatal("pool.RealSandboxes is unset: real_linux_test.go (package pool_test) sets it")
	}
	return RealSandboxes(t)
}

// Streamer is the cell-output streamer, for the tests that feed it the
// real output pipeline.
type Streamer struct{ s *streamer }

// NewStreamer makes a streamer over filter; partial lines are held for
// partialAfter (0: only until more bytes come or it finishes).
func NewStreamer(filter OutputFilter, emit func(Event), partialAfter time.Duration) Streamer {
	s := newStreamer(filter, emit)
	s.partialAfter = partialAfter
	return Streamer{s}
}

// Add feeds one kernel event.
func (s Streamer) Add(e kernel.Event) { s.s.add(e) }

// Finish flushes what is held.
func (s Streamer) Finish() { s.s.finish() }

// Recorder is quota_test.go's counting Observer, for the tests of
// package pool_test.
type Recorder = recorder

// NewRecorder returns an empty Recorder.
var NewRecorder = newRecorder

// Ends returns how many kernels r was told ended, by reason (a copy).
func (r *recorder) Ends() map[EndReason]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.ends)
}
