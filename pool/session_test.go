package pool

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// Parity §6 behaviours of one session, through Execute with real kernels.

func TestStatePersistsAcrossCells(t *testing.T) {
	p := newTestPool(t)
	first := run(t, p, Request{Owner: "alice", Code: "x = 41"})
	wantStatus(t, first, StatusSuccess)
	if first.Kernel.Reused || first.Kernel.ExecutionCount != 1 || first.Kernel.StateReset || first.ExitCode != 0 {
		t.Fatalf("first cell kernel block = %+v", first.Kernel)
	}
	second := run(t, p, Request{Owner: "alice", Code: "x += 1\nprint(x)"})
	wantStatus(t, second, StatusSuccess)
	if second.Output != "42\n" {
		t.Fatalf("output = %q, want %q", second.Output, "42\n")
	}
	if !second.Kernel.Reused || second.Kernel.ExecutionCount != 2 || second.Kernel.ID != first.Kernel.ID {
		t.Fatalf("second cell kernel block = %+v (first %+v)", second.Kernel, first.Kernel)
	}
	if second.Kernel.Mode != "default" {
		t.Fatalf("mode = %q", second.Kernel.Mode)
	}
}

func TestEmptyCodeIsANoOpCell(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: ""})
	wantStatus(t, res, StatusSuccess)
	if res.Output != "" || res.Kernel.ExecutionCount != 1 {
		t.Fatalf("result = %+v", res)
	}
}

func TestResetDiscardsState(t *testing.T) {
	p := newTestPool(t)
	first := run(t, p, Request{Code: "x = 1"})
	oldPid := pidOf(t, p, first.Kernel.ID)
	res := run(t, p, Request{Code: "print('x' in globals())", Reset: true})
	wantStatus(t, res, StatusSuccess)
	if res.Output != "False\n" || !res.Kernel.StateReset || res.Kernel.Reused || res.Kernel.ExecutionCount != 1 {
		t.Fatalf("reset result = %+v", res)
	}
	if res.Kernel.ID == first.Kernel.ID {
		t.Fatal("reset kept the kernel id")
	}
	assertDead(t, oldPid)
	// Reset on a key without a kernel starts one and reports no state loss.
	res = run(t, p, Request{Owner: "fresh", Code: "1", Reset: true})
	if res.Kernel.StateReset || res.Kernel.Reused {
		t.Fatalf("reset of a new key = %+v", res.Kernel)
	}
	if st := p.Stats(); st.Resets != 1 {
		t.Fatalf("resets counter = %d, want 1", st.Resets)
	}
}

func TestExceptionKeepsKernel(t *testing.T) {
	p := newTestPool(t)
	run(t, p, Request{Code: "keep = 'still here'"})
	res := run(t, p, Request{Code: "import sys\nprint('before')\nprint('warn', file=sys.stderr)\n1/0"})
	wantStatus(t, res, StatusError)
	if res.ExitCode != 1 || !strings.Contains(res.Error, "ZeroDivisionError") {
		t.Fatalf("exception result = %+v", res)
	}
	if !strings.HasPrefix(res.Output, "before\n"+StderrSeparator+"warn\n") || !strings.HasSuffix(res.Output, res.Error) {
		t.Fatalf("output = %q, want stdout + separator + stderr + traceback", res.Output)
	}
	again := run(t, p, Request{Code: "print(keep)"})
	if again.Output != "still here\n" || again.Kernel.ID != res.Kernel.ID || again.Kernel.ExecutionCount != 3 {
		t.Fatalf("after exception = %+v", again)
	}
}

func TestStderrOnlyCell(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: "import sys; print('out'); print('err', file=sys.stderr)"})
	wantStatus(t, res, StatusSuccess)
	if res.Output != "out\n"+StderrSeparator+"err\n" {
		t.Fatalf("output = %q", res.Output)
	}
}

func TestImportsPersist(t *testing.T) {
	p := newTestPool(t)
	run(t, p, Request{Code: "import json as j"})
	res := run(t, p, Request{Code: "print(j.dumps([1]))"})
	wantStatus(t, res, StatusSuccess)
	if res.Output != "[1]\n" {
		t.Fatalf("output = %q", res.Output)
	}
}

func TestSysExitEndsKernel(t *testing.T) {
	p := newTestPool(t)
	first := run(t, p, Request{Code: "print('bye')"})
	pid := pidOf(t, p, first.Kernel.ID)
	res := run(t, p, Request{Code: "import sys\nsys.exit(3)"})
	if !res.Kernel.Ended || res.Status != StatusSuccess {
		t.Fatalf("sys.exit result = %+v", res)
	}
	assertDead(t, pid)
	assertStagingGone(t, p, first.Kernel.ID)
	if n := len(p.List()); n != 0 {
		t.Fatalf("%d kernels listed after sys.exit", n)
	}
	next := run(t, p, Request{Code: "print('new')"})
	if next.Kernel.Reused || next.Kernel.ID == first.Kernel.ID || next.Kernel.ExecutionCount != 1 {
		t.Fatalf("after sys.exit = %+v", next.Kernel)
	}
	if st := p.Stats(); st.Ended != 1 {
		t.Fatalf("ended counter = %d", st.Ended)
	}
}

func TestSubprocessOutputReachesResult(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: "import subprocess, os\nsubprocess.run(['echo', 'from-child'])\nos.system('echo child-err >&2')"})
	wantStatus(t, res, StatusSuccess)
	if !strings.Contains(res.Output, "from-child\n") || !strings.Contains(res.Output, "child-err") {
		t.Fatalf("output = %q, want the subprocess's fd-level stdout and stderr", res.Output)
	}
}

func TestSessionsAreIsolated(t *testing.T) {
	p := newTestPool(t)
	run(t, p, Request{Owner: "alice", Code: "secret = 'alice-only'"})
	bob := run(t, p, Request{Owner: "bob", Code: "print('secret' in globals())"})
	if bob.Output != "False\n" || bob.Kernel.Reused {
		t.Fatalf("bob sees alice's state: %+v", bob)
	}
	// Every key part separates kernels.
	dir := testTempDir(t)
	ids := map[string]bool{}
	for _, req := range []Request{
		{Owner: "alice"}, {Owner: "alice", Mode: "other"}, {Owner: "alice", Cwd: dir},
	} {
		req.Code = "import os; print(os.getpid())"
		res := run(t, p, req)
		ids[res.Kernel.ID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("owner/mode/cwd variants shared kernels: %v", ids)
	}
	res := run(t, p, Request{Owner: "alice", Cwd: dir, Code: "import os; print(os.getcwd())"})
	if res.Output != dir+"\n" {
		t.Fatalf("cwd = %q, want %q", res.Output, dir)
	}
}

func TestParallelCellsShareOneProcess(t *testing.T) {
	p := newTestPool(t)
	const n = 8
	var wg sync.WaitGroup
	results := make([]*Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = p.Execute(t.Context(), Request{Owner: "par", Code: "import os\nprint(os.getpid())"})
		})
	}
	wg.Wait()
	pids := map[string]bool{}
	counts := map[int]bool{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("cell %d: %v", i, errs[i])
		}
		wantStatus(t, res, StatusSuccess)
		pids[res.Output] = true
		counts[res.Kernel.ExecutionCount] = true
	}
	if len(pids) != 1 {
		t.Fatalf("parallel cells ran in %d processes: %v", len(pids), pids)
	}
	for i := 1; i <= n; i++ {
		if !counts[i] {
			t.Fatalf("execution counts %v, want 1..%d each once", counts, n)
		}
	}
	if st := p.Stats(); st.KernelsStarted != 1 {
		t.Fatalf("kernels started = %d, want 1", st.KernelsStarted)
	}
}

func TestDeathMidCell(t *testing.T) {
	p := newTestPool(t)
	for _, tc := range []struct{ name, code, want string }{
		{"exit code", "import os, sys\nos.write(2, b'dying\\n')\nos._exit(3)", "The session kernel died while running the cell: dying"},
		{"signal", "import os\nos.kill(os.getpid(), 9)", "The session kernel died while running the cell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warm := run(t, p, Request{Owner: tc.name, Code: "pass"})
			pid := pidOf(t, p, warm.Kernel.ID)
			res := run(t, p, Request{Owner: tc.name, Code: tc.code})
			wantStatus(t, res, StatusError)
			if res.ExitCode != -1 || !strings.HasPrefix(res.Error, tc.want) || res.Kernel.OOMKilled {
				t.Fatalf("death result = %+v", res)
			}
			assertDead(t, pid)
			next := run(t, p, Request{Owner: tc.name, Code: "print(1)"})
			if next.Kernel.Reused || next.Kernel.ID == warm.Kernel.ID {
				t.Fatalf("after death = %+v", next.Kernel)
			}
		})
	}
	if st := p.Stats(); st.Died != 2 {
		t.Fatalf("died counter = %d", st.Died)
	}
}

func TestDeadKernelFoundAtAcquireIsReplaced(t *testing.T) {
	p := newTestPool(t)
	first := run(t, p, Request{Code: "x = 1"})
	pid := pidOf(t, p, first.Kernel.ID)
	// Kill the kernel behind the pool's back, between cells.
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	lv := p.byIDForTest(first.Kernel.ID)
	<-lv.k.Done()
	res := run(t, p, Request{Code: "print('x' in globals())"})
	wantStatus(t, res, StatusSuccess)
	if res.Output != "False\n" || !res.Kernel.StateReset || res.Kernel.Reused {
		t.Fatalf("after external kill = %+v", res)
	}
}

// byIDForTest returns the live kernel with id.
func (p *Pool) byIDForTest(id string) *live {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.byID[id]; s != nil {
		return s.live
	}
	return nil
}

func TestListDescribesKernels(t *testing.T) {
	p := newTestPool(t)
	for _, owner := range []string{"zed", "amy", "amy"} {
		run(t, p, Request{Owner: owner, Mode: "m" + strconv.Itoa(len(owner)), Code: "pass"})
	}
	run(t, p, Request{Owner: "amy", Mode: "other", Code: "pass"})
	list := p.List()
	if len(list) != 3 {
		t.Fatalf("list = %+v", list)
	}
	for i, k := range list {
		if !pidAlive(k.Pid) || k.Interpreter != testenv.Python || k.Busy || k.StartedAt.IsZero() || k.UID != os.Getuid() {
			t.Errorf("kernel %d = %+v", i, k)
		}
		if i > 0 && (list[i-1].Owner > k.Owner || list[i-1].Owner == k.Owner && list[i-1].ID > k.ID) {
			t.Errorf("list not sorted by owner then id: %s/%s before %s/%s", list[i-1].Owner, list[i-1].ID, k.Owner, k.ID)
		}
	}
	if list[0].Owner != "amy" || list[2].Owner != "zed" {
		t.Fatalf("owners = %s %s %s", list[0].Owner, list[1].Owner, list[2].Owner)
	}
	for _, k := range list {
		if k.Owner == "amy" && k.Mode == "m3" && k.ExecutionCount != 2 {
			t.Fatalf("amy/m3 execution count = %d, want 2", k.ExecutionCount)
		}
	}
}

func TestInterpreterThatDiesAtOnce(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Interpreter: "/bin/false", Code: "pass"})
	wantStatus(t, res, StatusError)
	if res.ExitCode != -1 || !strings.HasPrefix(res.Error, "The session kernel died") {
		t.Fatalf("result = %+v", res)
	}
	if n := len(p.List()); n != 0 {
		t.Fatalf("%d kernels left", n)
	}
}
