package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/kernel"
)

// supervisors are the two ways an init supervises its interpreter: the
// reaper it execs into, and the Go loop it falls back to.
var supervisors = []struct {
	name     string
	noReaper bool
}{{kinit.SupervisorReaper, false}, {kinit.SupervisorGo, true}}

// supervisedIso is an Isolator whose inits use the supervisor named.
func supervisedIso(t *testing.T, noReaper bool) *Isolator {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	if !noReaper && runtime.GOARCH != "amd64" {
		t.Skip("the reaper is x86-64 code; inits elsewhere keep the Go supervisor")
	}
	iso := newIso(t, nil)
	iso.noReaper = noReaper
	return iso
}

// supervisedKernel starts alice's kernel under the supervisor named, runs
// code in it, and checks that its init and kernel.isolation name it.
func supervisedKernel(t *testing.T, name string, noReaper bool, code string) *kernel.Kernel {
	t.Helper()
	k, sb := startKernel(t, supervisedIso(t, noReaper), "alice", "default", Limits{})
	run(t, k, code)
	if got := sb.Supervisor(); got != name {
		t.Fatalf("the init reported supervisor %q, want %q", got, name)
	}
	if got := k.Isolation().Supervisor; got != name {
		t.Errorf("kernel.isolation.supervisor = %q, want %q", got, name)
	}
	return k
}

// procStatus is the fields of /proc/<pid>/status, or with a tid of
// /proc/<pid>/task/<tid>/status.
func procStatus(t *testing.T, pid int, tid ...int) map[string]string {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/status", pid)
	if len(tid) > 0 {
		path = fmt.Sprintf("/proc/%d/task/%d/status", pid, tid[0])
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestInitBecomesReaper: once the kernel runs, its init is the small
// reaper (a few kB of anonymous memory, its signals blocked for its
// signalfd), or, with the reaper off, the Go init (over a MiB), and the
// init's ready line says which.
func TestInitBecomesReaper(t *testing.T) {
	for _, c := range supervisors {
		t.Run(c.name, func(t *testing.T) {
			k := supervisedKernel(t, c.name, c.noReaper, "x = 1")
			st := procStatus(t, k.Pid())
			anon, err := strconv.Atoi(strings.TrimSuffix(st["RssAnon"], " kB"))
			if err != nil {
				t.Fatalf("RssAnon %q: %v", st["RssAnon"], err)
			}
			t.Logf("init %s: RssAnon %d kB, VmRSS %s, SigBlk %s", st["Name"], anon, st["VmRSS"], st["SigBlk"])
			sigs := []syscall.Signal{syscall.SIGCHLD, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
				syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}
			if c.noReaper {
				if anon < 1024 {
					t.Fatalf("Go init's RssAnon %d kB: the reaper test's bound would not tell them apart", anon)
				}
				// The fallback undid the block: no thread keeps one.
				tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", k.Pid()))
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range tasks {
					tid, _ := strconv.Atoi(task.Name())
					if blocked := sigBlk(t, procStatus(t, k.Pid(), tid)); blocked&sigMask(sigs) != 0 {
						t.Errorf("Go init thread %d still blocks signals %#x", tid, blocked)
					}
				}
				return
			}
			if st["Name"] != kinit.ReaperName || anon >= 64 {
				t.Fatalf("init is %q with RssAnon %d kB, want %s under 64 kB", st["Name"], anon, kinit.ReaperName)
			}
			blocked := sigBlk(t, st)
			for _, s := range sigs {
				if blocked&sigMask([]syscall.Signal{s}) == 0 {
					t.Errorf("the reaper does not block %v (SigBlk %s): it would take its default action", s, st["SigBlk"])
				}
			}
		})
	}
}

func sigMask(sigs []syscall.Signal) uint64 {
	var m uint64
	for _, s := range sigs {
		m |= 1 << (s - 1)
	}
	return m
}

func sigBlk(t *testing.T, st map[string]string) uint64 {
	blocked, err := strconv.ParseUint(st["SigBlk"], 16, 64)
	if err != nil {
		t.Fatalf("SigBlk %q: %v", st["SigBlk"], err)
	}
	return blocked
}

// TestInitForwardsSignals: an interrupt reaches a running cell through
// the init (KeyboardInterrupt, the kernel lives on), and a SIGTERM to the
// init ends the interpreter with it.
func TestInitForwardsSignals(t *testing.T) {
	for _, c := range supervisors {
		t.Run(c.name, func(t *testing.T) {
			k := supervisedKernel(t, c.name, c.noReaper, "x = 1")
			type result struct {
				r   *kernel.Reply
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				r, err := k.Exec(ctx, kernel.Cell{Code: "import time\ntime.sleep(600)"})
				done <- result{r, err}
			}()
			for { // until the cell runs
				err := k.Interrupt()
				if err == nil {
					break
				}
				if !errors.Is(err, kernel.ErrIdle) {
					t.Fatalf("Interrupt: %v", err)
				}
				time.Sleep(time.Millisecond)
			}
			var res result
			select {
			case res = <-done:
			case <-time.After(2 * time.Minute): // the interrupt grace kills the kernel long before
				t.Fatal("the interrupted cell never ended")
			}
			if res.err != nil || res.r.Status != "error" || !strings.Contains(res.r.Traceback, "KeyboardInterrupt") {
				t.Fatalf("interrupted cell: %+v, %v; want a KeyboardInterrupt", res.r, res.err)
			}
			run(t, k, "x = 2")
			if err := syscall.Kill(k.Pid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-k.Done():
			case <-time.After(time.Minute):
				t.Fatal("the kernel outlived a SIGTERM to its init")
			}
			var d *kernel.DeathError
			if !errors.As(k.Err(), &d) || d.Signal != "SIGTERM" {
				t.Fatalf("kernel died with %v (%+v), want the interpreter's SIGTERM", k.Err(), d)
			}
		})
	}
}

// TestInitReapsOrphans: processes a cell double-forks end as orphans of
// the init, which reaps them: no zombie stays in the kernel. They end
// while the init is stopped, so it gets one SIGCHLD for all of them and
// must reap until none is left.
func TestInitReapsOrphans(t *testing.T) {
	orphans := `import os, time
r, w = os.pipe()
pr, pw = os.pipe()
orphans = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os.close(w)
            os.write(pw, b"%8d" % os.getpid())
            os.read(r, 1)
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
    orphans.append(int(os.read(pr, 8)))
os.close(r)
`
	end := `os.close(w)
def state(p):
    return open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()[0]
while any(state(p) != "Z" for p in orphans):
    time.sleep(0.001)
`
	for _, c := range supervisors {
		t.Run(c.name, func(t *testing.T) {
			k := supervisedKernel(t, c.name, c.noReaper, orphans)
			if err := syscall.Kill(k.Pid(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			for procState(t, k.Pid()) != "T" { // until the init stopped
				time.Sleep(time.Millisecond)
			}
			run(t, k, end) // the orphans are zombies, the init's SIGCHLDs pending
			if err := syscall.Kill(k.Pid(), syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			var zombies []int
			for i := 0; i < 1000; i++ { // until the init reaped them all
				if zombies = zombiesOf(t, k.Pid()); len(zombies) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(zombies) > 0 {
				t.Fatalf("zombies left in the kernel: %v", zombies)
			}
			run(t, k, "x = 1")
		})
	}
}

// procState is a process's state letter and its parent's pid (zero
// values once it is gone).
func procStat(t *testing.T, pid int) (state string, ppid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 2 {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid
}

func procState(t *testing.T, pid int) string {
	s, _ := procStat(t, pid)
	return s
}

// zombiesOf lists parent's zombie children (cgroup.procs does not list
// zombies: a process leaves its cgroup when it exits).
func zombiesOf(t *testing.T, parent int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, pp := procStat(t, pid); pp == parent && s == "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestTenantCannotTouchInit: the interpreter (the kernel uid) can neither
// signal nor trace its init, nor read its memory or environment.
func TestTenantCannotTouchInit(t *testing.T) {
	code := `import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def ptrace():
    if libc.ptrace(16, 1, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
out = []
for name, f in [("kill", lambda: os.kill(1, signal.SIGTERM)), ("kill0", lambda: os.kill(1, 0)),
                ("ptrace", ptrace), ("mem", lambda: open("/proc/1/mem", "rb").read(1)),
                ("environ", lambda: open("/proc/1/environ", "rb").read())]:
    try:
        f()
        out.append(name + "=ok")
    except OSError as e:
        out.append(name + "=" + ("denied" if e.errno in (1, 13) else str(e.errno)))
print(" ".join(out))
`
	for _, c := range supervisors {
		t.Run(c.name, func(t *testing.T) {
			k := supervisedKernel(t, c.name, c.noReaper, "x = 1")
			r := run(t, k, code)
			want := "kill=denied kill0=denied ptrace=denied mem=denied environ=denied"
			if got := strings.TrimSpace(r.Stdout); got != want {
				t.Fatalf("the tenant's attempts on pid 1: %q, want %q", got, want)
			}
		})
	}
}

// Doctor's supervisor line: on x86-64 with executable memfds (this host)
// the reaper and its size; any probe error names the Go fallback, its
// cost, and the cause as the probe gave it.
func TestDoctorNamesSupervisor(t *testing.T) {
	for _, c := range []struct {
		size int
		err  error
		want string
	}{
		{466, nil, "reaper: once the interpreter runs, each kernel's init execs into a 466-byte reaper (ps: kernpool-reaper)"},
		{0, errors.New("reaper: memfd_create: operation not permitted"),
			"the init's Go supervisor (about 1 MiB more per kernel): reaper: memfd_create: operation not permitted"},
	} {
		if got := supervisorText(c.size, c.err); got != c.want {
			t.Errorf("supervisorText(%d, %v) = %q, want %q", c.size, c.err, got, c.want)
		}
	}
	iso := supervisedIso(t, false)
	line := ""
	for _, l := range strings.Split(iso.Report().String(), "\n") {
		if strings.HasPrefix(l, "supervisor:") {
			line = l
		}
	}
	size, err := kinit.ReaperProbe()
	if err != nil || size <= 0 || size > 4096 {
		t.Fatalf("ReaperProbe on x86-64 = %d, %v; want a reaper of at most a page", size, err)
	}
	if !strings.Contains(line, "-byte reaper (ps: kernpool-reaper)") {
		t.Errorf("doctor's supervisor line = %q, want the reaper", line)
	}
}
