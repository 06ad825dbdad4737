package pool

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// cellMeta gathers, during one Execute call, what the Result does not
// carry but observers want.
type cellMeta struct {
	uid        int
	tools      *cellTools // nil when the kernel has no tool set
	replyBytes int64
	// dropped counts output bytes the inline caps left out.
	dropped int64
	// between counts the kernel's output dropped between cells since its
	// previous cell (live.takeBetween).
	between    int64
	redactions int
}

// noteReply records what the daemon buffered for the cell's reply.
func (m *cellMeta) noteReply(r *kernel.Reply) {
	if r != nil {
		m.replyBytes += int64(len(r.Stdout) + len(r.Stderr) + len(r.Traceback))
	}
}

// takeRedactions collects the masks the kernel's filter applied to this
// cell (-1 when the filter does not count).
func (m *cellMeta) takeRedactions(f OutputFilter) {
	if rc, ok := f.(RedactionCounter); ok {
		m.redactions += rc.TakeRedactions()
		return
	}
	m.redactions = -1
}

// dropRedactions forgets the masks f counted so far (see Pool.finish).
func dropRedactions(f OutputFilter) {
	if rc, ok := f.(RedactionCounter); ok {
		rc.TakeRedactions()
	}
}

// cellTools counts a cell's tool calls by name and outcome on their
// way to the request's handler.
type cellTools struct {
	h        ToolHandler
	mu       sync.Mutex
	byName   map[string]int
	outcomes map[ToolOutcome]int
}

// HandleTool forwards the call and counts it.
func (t *cellTools) HandleTool(ctx context.Context, call ToolCall) (string, error) {
	out, err := t.h.HandleTool(ctx, call)
	outcome := ToolOK
	if err != nil {
		outcome = ToolError
	}
	t.mu.Lock()
	if t.byName == nil {
		t.byName, t.outcomes = map[string]int{}, map[ToolOutcome]int{}
	}
	t.byName[call.Tool]++
	t.outcomes[outcome]++
	t.mu.Unlock()
	return out, err
}

// counts returns copies of the counters (nil maps when no call was made).
func (t *cellTools) counts() (map[string]int, map[ToolOutcome]int) {
	if t == nil {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byName, t.outcomes
}

// observeCell tells the observer about a settled cell and logs one line
// for it (never its code or output).
func (p *Pool) observeCell(rq normalized, start time.Time, m *cellMeta, res *Result) {
	ev := &CellEvent{
		Time: start, Owner: rq.key.owner, KernelID: res.Kernel.ID, Mode: rq.key.mode, UID: m.uid,
		Code: rq.code, Status: res.Status, Duration: time.Since(start), ExitCode: res.ExitCode,
		OOMKilled: res.Kernel.OOMKilled, ReplyBytes: m.replyBytes, Redactions: m.redactions,
		OutputBytes: int64(res.StdoutBytesTotal + res.StderrBytesTotal),
	}
	if res.Kernel.ID == "" {
		ev.UID = -1
	}
	ev.ToolCalls, ev.ToolOutcomes = m.tools.counts()
	ev.DroppedBytes, ev.BetweenCellsBytes = m.dropped, m.between
	if res.StdoutSpillPath != "" {
		if fi, err := os.Stat(res.StdoutSpillPath); err == nil {
			ev.SpillBytes = fi.Size()
		}
	}
	p.obs.CellDone(ev)
	p.log.Info("cell", "owner", ev.Owner, "kernel", ev.KernelID, "mode", ev.Mode, "status", ev.Status,
		"duration", ev.Duration.Round(time.Millisecond).String(), "output_bytes", ev.OutputBytes,
		"tool_calls", res.ToolCallsMade)
}
