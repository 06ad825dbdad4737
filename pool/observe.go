package pool

import "time"

// EndReason is why a kernel ended: a metrics label and an audit field.
// Every teardown maps onto exactly one (endReasonOf).
type EndReason string

// End reasons.
const (
	// EndIdle: the idle reaper killed it after IdleTimeout.
	EndIdle EndReason = "idle"
	// EndLRU: evicted by the MaxKernels cap to make room.
	EndLRU EndReason = "lru"
	// EndOOM: its memory limit killed it.
	EndOOM EndReason = "oom"
	// EndTimeout: a cell hit its timeout.
	EndTimeout EndReason = "timeout"
	// EndInterrupt: an interrupt (explicit, or the caller gone) outlived
	// its grace and the kernel was killed.
	EndInterrupt EndReason = "interrupt"
	// EndExit: the cell called sys.exit.
	EndExit EndReason = "exit"
	// EndShutdown: owner shutdown, kill by id, or the pool closing.
	EndShutdown EndReason = "shutdown"
	// EndCrash: it died on its own or broke the wire protocol.
	EndCrash EndReason = "crash"
	// EndReset: a request asked for a fresh kernel.
	EndReset EndReason = "reset"
)

// EndReasons lists every EndReason (metrics pre-create their series).
func EndReasons() []EndReason {
	return []EndReason{EndIdle, EndLRU, EndOOM, EndTimeout, EndInterrupt, EndExit, EndShutdown, EndCrash, EndReset}
}

// Refusal is why a request was refused before any cell ran.
type Refusal string

// Refusals.
const (
	// RefusedCapacity: MaxKernels kernels exist and all are busy (ErrCapacity).
	RefusedCapacity Refusal = "capacity"
	// RefusedQuota: the owner is over a per-owner quota (ErrQuota).
	RefusedQuota Refusal = "quota"
)

// Statuses lists every cell Status.
func Statuses() []Status {
	return []Status{StatusSuccess, StatusError, StatusTimeout, StatusInterrupted}
}

// ToolOutcome is how one tool call the pool forwarded ended.
type ToolOutcome string

// Tool-call outcomes.
const (
	// ToolOK: the handler answered with a result.
	ToolOK ToolOutcome = "ok"
	// ToolError: the handler answered with an error (refused, timed out, failed).
	ToolError ToolOutcome = "error"
)

// CellEvent describes one settled cell to an Observer. It carries the
// owner and the code for the audit log; metrics must not use either as a
// label.
type CellEvent struct {
	// Time is when the call began.
	Time time.Time
	// Owner is the tenant; KernelID and Mode name the kernel ("" when no
	// kernel was reached); UID is the uid the cell ran as: -1 when none
	// ran (no kernel reached, or its kernel stopped before the cell).
	Owner, KernelID, Mode string
	UID                   int
	// Code is the cell's source (hash it; store it only when asked to).
	Code string
	// Status, Duration and ExitCode are the Result's.
	Status   Status
	Duration time.Duration
	ExitCode int
	// OOMKilled: the kernel's memory limit killed it during this cell.
	OOMKilled bool
	// ToolCalls counts the cell's forwarded tool calls by tool name.
	ToolCalls map[string]int
	// ToolOutcomes counts them by outcome.
	ToolOutcomes map[ToolOutcome]int
	// OutputBytes is the cell's stdout+stderr as the kernel produced it;
	// DroppedBytes the part the inline caps left out; SpillBytes what the
	// spill file holds; ReplyBytes what the daemon buffered for the reply.
	OutputBytes, DroppedBytes, SpillBytes, ReplyBytes int64
	// BetweenCellsBytes is output the kernel wrote while none of its cells
	// ran (a thread or process of an earlier cell), dropped since the
	// kernel's previous cell; it reached no result.
	BetweenCellsBytes int64
	// Redactions counts masked secrets in the cell's output (-1: the
	// output filter does not count).
	Redactions int
}

// Observer is told what the pool does (metrics, audit log). Calls are
// synchronous and made outside the registry lock: keep them fast and
// never block on I/O a kernel controls. pool/daemon wires the adapters.
type Observer interface {
	// KernelStarted: a kernel of mode is live.
	KernelStarted(mode string)
	// KernelEnded: a kernel of mode was torn down for reason.
	KernelEnded(mode string, reason EndReason)
	// SpawnFailed: a kernel of mode could not be started.
	SpawnFailed(mode string)
	// CellDone: a cell settled (every Result the pool returns).
	CellDone(ev *CellEvent)
	// Refused: a request was refused before running.
	Refused(mode string, why Refusal)
	// SparesChanged: the ready warm spares of mode changed by delta (+1
	// one became ready, -1 one was claimed or ended). A claimed spare
	// is reported by KernelStarted once it is bound to its owner.
	SparesChanged(mode string, delta int)
}

// RedactionCounter is implemented by output filters that count what they
// masked; the pool reads it after each cell.
type RedactionCounter interface {
	// TakeRedactions returns the masks applied since the last call.
	TakeRedactions() int
}

// Observers fans events out to several observers (nil entries skipped).
func Observers(list ...Observer) Observer {
	var out multiObserver
	for _, o := range list {
		if o != nil {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nopObserver{}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

type multiObserver []Observer

func (m multiObserver) KernelStarted(mode string) {
	for _, o := range m {
		o.KernelStarted(mode)
	}
}

func (m multiObserver) KernelEnded(mode string, r EndReason) {
	for _, o := range m {
		o.KernelEnded(mode, r)
	}
}

func (m multiObserver) SpawnFailed(mode string) {
	for _, o := range m {
		o.SpawnFailed(mode)
	}
}

func (m multiObserver) CellDone(ev *CellEvent) {
	for _, o := range m {
		o.CellDone(ev)
	}
}

func (m multiObserver) Refused(mode string, why Refusal) {
	for _, o := range m {
		o.Refused(mode, why)
	}
}

func (m multiObserver) SparesChanged(mode string, delta int) {
	for _, o := range m {
		o.SparesChanged(mode, delta)
	}
}

// nopObserver is the Observer of a pool configured without one.
type nopObserver struct{}

func (nopObserver) KernelStarted(string)          {}
func (nopObserver) KernelEnded(string, EndReason) {}
func (nopObserver) SpawnFailed(string)            {}
func (nopObserver) CellDone(*CellEvent)           {}
func (nopObserver) Refused(string, Refusal)       {}
func (nopObserver) SparesChanged(string, int)     {}
