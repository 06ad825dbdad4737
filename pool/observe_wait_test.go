package pool

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// A cell whose wait for its busy kernel was abandoned reached no kernel:
// its cell event names none and has uid -1.
func TestCellEventOfAnAbandonedWait(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) { c.Observer = rec })
	var once sync.Once
	running := make(chan struct{})
	busyCtx, stopBusy := context.WithCancel(t.Context())
	defer stopBusy()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Execute(busyCtx, Request{Owner: "o", Code: "import time\nprint('running', flush=True)\ntime.sleep(600)",
			Stream: func(Event) { once.Do(func() { close(running) }) }})
	}()
	<-running
	abandoned, cancel := context.WithCancel(t.Context())
	cancel() // gives up at once: the key's kernel is busy
	res, err := p.Execute(abandoned, Request{Owner: "o", Code: "1"})
	if err != nil || res.Status != StatusInterrupted || res.Kernel.ID != "" {
		t.Fatalf("abandoned wait: %+v, %v", res, err)
	}
	stopBusy()
	<-done
	rec.mu.Lock()
	cells := slices.Clone(rec.cells)
	rec.mu.Unlock()
	i := slices.IndexFunc(cells, func(e CellEvent) bool { return e.KernelID == "" })
	if len(cells) != 2 || i < 0 || cells[i].UID != -1 || cells[i].Status != StatusInterrupted {
		t.Fatalf("cell events %+v, want two, the abandoned one without kernel and with uid -1", cells)
	}
}
