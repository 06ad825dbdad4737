package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// logObserver writes each event it is told as one line.
type logObserver struct{ lines []string }

func (l *logObserver) add(f string, a ...any) { l.lines = append(l.lines, fmt.Sprintf(f, a...)) }

func (l *logObserver) KernelStarted(mode string)            { l.add("started %s", mode) }
func (l *logObserver) KernelEnded(mode string, r EndReason) { l.add("ended %s %s", mode, r) }
func (l *logObserver) SpawnFailed(mode string)              { l.add("spawn failed %s", mode) }
func (l *logObserver) CellDone(ev *CellEvent)               { l.add("cell %s", ev.Mode) }
func (l *logObserver) Refused(mode string, why Refusal)     { l.add("refused %s %s", mode, why) }
func (l *logObserver) SparesChanged(mode string, delta int) { l.add("spares %s %+d", mode, delta) }

// Observers tells every event to each observer it was given (metrics and
// the audit log both see every kernel and cell), skipping nil ones.
func TestObserversFanOutToEach(t *testing.T) {
	want := []string{"started m", "ended m idle", "spawn failed m", "cell m", "refused m capacity", "spares m -1"}
	tell := func(o Observer) {
		o.KernelStarted("m")
		o.KernelEnded("m", EndIdle)
		o.SpawnFailed("m")
		o.CellDone(&CellEvent{Mode: "m"})
		o.Refused("m", RefusedCapacity)
		o.SparesChanged("m", -1)
	}
	for _, n := range []int{1, 2, 3} {
		var obs []*logObserver
		var list []Observer
		for range n {
			o := &logObserver{}
			obs = append(obs, o)
			list = append(list, nil, o)
		}
		tell(Observers(list...))
		for i, o := range obs {
			if !slices.Equal(o.lines, want) {
				t.Errorf("%d observers: observer %d told %q, want %q", n, i, o.lines, want)
			}
		}
	}
	// None, or only nil ones: events go nowhere, without a panic.
	tell(Observers())
	tell(Observers(nil, nil))
}

// A cell's ReplyBytes is what the daemon buffered for its reply: the
// stdout, the stderr and the traceback, summed (no filter caps them here).
func TestCellEventReplyBytesSumsStdoutStderrTraceback(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) { c.Observer = rec })
	res := run(t, p, Request{Code: "import sys\nprint('o' * 10)\nprint('e' * 20, file=sys.stderr)\nraise ValueError('boom')"})
	wantStatus(t, res, StatusError)
	if !strings.Contains(res.Error, "ValueError: boom") {
		t.Fatalf("traceback %q", res.Error)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := int64(11 + 21 + len(res.Error)); len(rec.cells) != 1 || rec.cells[0].ReplyBytes != want {
		t.Fatalf("cell events %+v, want one with ReplyBytes %d (11 stdout, 21 stderr, %d traceback)", rec.cells, want, len(res.Error))
	}
}
