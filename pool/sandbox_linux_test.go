package pool

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/kernel"
)

// groupSandbox is a minimal real sandbox (own process group, killpg) that
// records how the pool and the kernel drive it.
type groupSandbox struct {
	// gate, when set, holds Prepare until it is closed; entered is closed
	// when Prepare starts waiting.
	gate, entered chan struct{}
	failPrepare   bool

	mu                    sync.Mutex
	pid                   int
	prepared, kills, rels int
	id, owner, mode       string
	limits                Limits
}

func (s *groupSandbox) Prepare(cmd *exec.Cmd, _ string) error {
	if s.gate != nil {
		close(s.entered)
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prepared++
	if s.failPrepare {
		return errors.New("prepare refused by the test")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return nil
}

func (s *groupSandbox) Started(pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = pid
	return nil
}

func (s *groupSandbox) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kills++
	if s.pid > 0 {
		// The group is the kernel's own: the runner leads it.
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	}
	return nil
}

func (s *groupSandbox) Release() (kernel.Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rels++
	return kernel.Verdict{}, nil
}

func (s *groupSandbox) Stats() (kernel.Stats, error) {
	return kernel.Stats{Pids: 1, MemoryCurrent: 4096}, nil
}
func (s *groupSandbox) UID() int { return -1 }
func (s *groupSandbox) Isolation() kernel.Isolation {
	return kernel.Isolation{Mode: kernel.IsolationProcess, UID: -1, Namespaces: []string{}, Network: true}
}

func (s *groupSandbox) releases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rels
}

// sandboxFactory hands out groupSandboxes and remembers them.
type sandboxFactory struct {
	mu          sync.Mutex
	made        []*groupSandbox
	failPrepare bool
	failNew     bool
	gate        chan struct{}
	entered     chan struct{}
}

func (f *sandboxFactory) NewSandbox(id, owner, mode string, limits Limits) (kernel.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNew {
		return nil, fmt.Errorf("no uid left")
	}
	s := &groupSandbox{gate: f.gate, entered: f.entered, failPrepare: f.failPrepare, id: id, owner: owner, mode: mode, limits: limits}
	f.made = append(f.made, s)
	return s, nil
}

func TestSandboxPerSpawn(t *testing.T) {
	f := &sandboxFactory{}
	p := newTestPool(t, func(c *Config) { c.Sandboxes = f })
	lim := Limits{MemoryMax: 64 << 20, PidsMax: 32}
	res := run(t, p, Request{Owner: "o", Mode: "m", Limits: lim, Code: "pass"})
	wantStatus(t, res, StatusSuccess)
	sb := f.made[0]
	if sb.id != res.Kernel.ID || sb.owner != "o" || sb.mode != "m" || sb.limits != lim {
		t.Fatalf("NewSandbox got %s/%s/%s/%+v", sb.id, sb.owner, sb.mode, sb.limits)
	}
	list := p.List()
	if list[0].Pids != 1 || list[0].MemoryCurrent != 4096 {
		t.Fatalf("stats not listed: %+v", list[0])
	}
	pid := list[0].Pid
	if err := p.Kill(res.Kernel.ID); err != nil {
		t.Fatal(err)
	}
	assertDead(t, pid)
	if n := sb.releases(); n != 1 {
		t.Fatalf("sandbox released %d times, want 1", n)
	}
}

func TestSpawnFailureReleasesEverything(t *testing.T) {
	f := &sandboxFactory{failPrepare: true}
	tools := fakeToolFactory{rec: &toolRecorder{}}
	p := newTestPool(t, func(c *Config) { c.Sandboxes = f; c.Tools = tools })
	_, err := p.Execute(t.Context(), Request{Tools: []string{"t"}, Code: "pass"})
	if !errors.Is(err, ErrSpawn) {
		t.Fatalf("err = %v, want ErrSpawn", err)
	}
	if n := f.made[0].releases(); n != 1 {
		t.Fatalf("sandbox of the failed spawn released %d times, want 1", n)
	}
	if _, _, closed := tools.last().counts(); closed != 1 {
		t.Fatalf("tool server of the failed spawn closed %d times, want 1", closed)
	}
	if st := p.Stats(); st.SpawnFailures != 1 || st.KernelsLive != 0 {
		t.Fatalf("stats = %+v", st)
	}
	f.mu.Lock()
	f.failPrepare, f.failNew = false, true
	f.mu.Unlock()
	if _, err := p.Execute(t.Context(), Request{Code: "pass"}); !errors.Is(err, ErrSpawn) {
		t.Fatalf("err = %v, want ErrSpawn", err)
	}
	if n := len(p.List()); n != 0 {
		t.Fatalf("%d kernels after failed spawns", n)
	}
}

func TestCloseWaitsForSpawnsInFlight(t *testing.T) {
	f := &sandboxFactory{gate: make(chan struct{}), entered: make(chan struct{})}
	p := newTestPool(t, func(c *Config) { c.Sandboxes = f })
	done := make(chan outcome, 1)
	go func() {
		res, err := p.Execute(t.Context(), Request{Code: "pass"})
		done <- outcome{res, err}
	}()
	<-f.entered // the spawn is inside kernel.Start, held in Prepare
	expired, cancel := context.WithCancel(t.Context())
	cancel() // no drain grace: Close goes straight to its kill phase
	closed := make(chan error, 1)
	go func() { closed <- p.Close(expired) }()
	waitFor(t, "Close's kill phase", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.closing && len(p.slots) == 0
	})
	if _, err := p.Execute(t.Context(), Request{Owner: "late", Code: "pass"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Execute during Close = %v, want ErrClosed", err)
	}
	close(f.gate)
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want the drain cut short", err)
	}
	// Close has returned: the kernel that was starting must have started
	// (Close waited for the spawn) and be gone already.
	sb := f.made[0]
	sb.mu.Lock()
	pid := sb.pid
	sb.mu.Unlock()
	if pid == 0 {
		t.Fatal("Close returned before the spawn in flight finished")
	}
	assertDead(t, pid)
	if n := sb.releases(); n != 1 {
		t.Fatalf("sandbox released %d times", n)
	}
	o := <-done
	if o.err != nil || o.res.Status != StatusInterrupted || !strings.Contains(o.res.Output, "pool closed") {
		t.Fatalf("cell of the interrupted spawn = %+v, %v", o.res, o.err)
	}
}

// TestCellEventOfACellThatNeverRan: a cell whose kernel started after
// its owner was shut down (the spawn was in flight) is interrupted
// before any of its code ran: its event names the kernel but uid -1 (the
// audit log's "uid": the cell ran as no uid), not one a cell could have
// run as (the mutant uid 1 would name a system user).
func TestCellEventOfACellThatNeverRan(t *testing.T) {
	f := &sandboxFactory{gate: make(chan struct{}), entered: make(chan struct{})}
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) { c.Sandboxes = f; c.Observer = rec })
	done := make(chan outcome, 1)
	go func() {
		res, err := p.Execute(t.Context(), Request{Owner: "o", Code: "pass"})
		done <- outcome{res, err}
	}()
	<-f.entered // the spawn is held in Prepare
	if n := p.ShutdownOwner("o"); n != 0 {
		t.Fatalf("ShutdownOwner killed %d kernels, want 0 (the one starting is not live yet)", n)
	}
	close(f.gate)
	o := <-done
	if o.err != nil || o.res.Status != StatusInterrupted || o.res.Kernel.ID == "" || !strings.Contains(o.res.Output, "owner shutdown") {
		t.Fatalf("cell of the spawn its owner's shutdown overtook = %+v, %v", o.res, o.err)
	}
	rec.mu.Lock()
	cells := slices.Clone(rec.cells)
	rec.mu.Unlock()
	if len(cells) != 1 || cells[0].KernelID != o.res.Kernel.ID || cells[0].UID != -1 || cells[0].Status != StatusInterrupted {
		t.Fatalf("cell events = %+v, want one for kernel %s with uid -1", cells, o.res.Kernel.ID)
	}
}
