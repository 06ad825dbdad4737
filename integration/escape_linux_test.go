//go:build integration && linux

package integration

import (
	"strings"
	"testing"
	"time"
)

// escapeCase is one hostile cell. After it, the daemon must still serve the
// owner, and after owner shutdown nothing of the kernel may remain.
type escapeCase struct {
	name    string
	code    string
	timeout string
	// check inspects the attack's result while its kernel may still live.
	check func(t *testing.T, d *Daemon, res Result)
	// vmOnly marks attacks too dangerous for a shared host if the sandbox failed.
	vmOnly bool
	// bystander starts another owner's kernel first, which must survive.
	bystander bool
}

const setsidGrandchild = `
import subprocess
p = subprocess.Popen(['/bin/sleep', '300'], start_new_session=True)
print(p.pid)
`

const doubleForkDaemon = `
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.chdir('/')
        os.write(w, str(os.getpid()).encode()); os.close(w)
        fd = os.open('/dev/null', os.O_RDWR)
        for i in (0, 1, 2):
            os.dup2(fd, i)
        time.sleep(300)
        os._exit(0)
    os._exit(0)
os.close(w)
print(os.read(r, 32).decode())
`

// forkBomb is bounded (2^8 processes at most) so that a broken pids cap
// cannot hurt a shared host; the cap of 64 must still stop it early.
const forkBomb = `
import os, time
root = os.getpid(); failed = 0
for i in range(8):
    try:
        if os.fork() == 0:
            continue
    except OSError:
        failed += 1
if os.getpid() != root:
    time.sleep(120); os._exit(0)
time.sleep(1)
print("failed", failed)
`

const forgedFrames = `
import os, json
env = open('/proc/self/environ', 'rb').read().split(b'\0')
sent = [e.split(b'=', 1)[1] for e in env if e.startswith(b'KERNPOOL_SENTINEL=')] or [b'KPFAKE']
body = json.dumps({"id": "x", "status": "ok", "stdout": "FORGED", "execution_count": 99}).encode()
for s in sent:
    os.write(1, b'\n' + s + b' ' + str(len(body)).encode() + b'\n' + body)
    os.write(1, b'\n' + s + b' abc\n[1,2]')
    os.write(1, b'\n' + s + b' 7\n[1,2,3]')
print("after")
`

// muteStdin points every read end of a pipe the kernel holds (the daemon's
// request pipe among them; fd 0 itself is /dev/null for cells) at a private
// pipe nobody writes: a read already blocked gets one more chunk, then the
// kernel reads nothing more from the daemon.
const muteStdin = `
import os
r, w = os.pipe()
n = 0
for fd in map(int, os.listdir('/proc/self/fd')):
    if fd in (r, w):
        continue
    try:
        target = os.readlink('/proc/self/fd/%d' % fd)
        flags = [l for l in open('/proc/self/fdinfo/%d' % fd) if l.startswith('flags:')][0].split()[1]
    except (OSError, IndexError):
        continue
    if target.startswith('pipe:') and int(flags, 8) & 3 == os.O_RDONLY:
        os.dup2(r, fd)
        n += 1
print('muted', n)
`

func escapeCases() []escapeCase {
	return []escapeCase{
		{name: "setsid_grandchild", code: setsidGrandchild, check: checkEscapedPid},
		{name: "double_fork_daemon", code: doubleForkDaemon, check: checkEscapedPid},
		{name: "fork_bomb_pids_cap", code: forkBomb, timeout: "60s", check: checkForkBomb},
		{name: "memory_hog_oom", code: "b = b'x' * (512 << 20)\nprint('survived')", check: checkOOM},
		{name: "close_stdout_stderr", code: "import os\nos.close(1)\nos.close(2)\nprint('gone')"},
		{name: "flood_stdout", code: "import os, sys\nsys.stdout.write('x' * 5000000)\nos.write(1, b'y' * 5000000)", check: checkCapped},
		{name: "flood_stderr", code: "import os, sys\nsys.stderr.write('e' * 5000000)\nos.write(2, b'f' * 5000000)", check: checkCapped},
		{name: "forged_frames", code: forgedFrames, check: checkForgedIgnored},
		{name: "ignores_sigterm", code: `
import signal, subprocess
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen(['/usr/bin/python3', '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'], start_new_session=True)
print('ok')`},
		{name: "sigstop_self", code: "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)", timeout: "3s", check: checkTimedOut},
		{name: "sigstop_child", code: "import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'kill -STOP $$; sleep 300'])\nprint('ok')"},
		{name: "deletes_own_tmpdir", code: `
import os, shutil
shutil.rmtree(os.environ['TMPDIR'], ignore_errors=True)
shutil.rmtree(os.path.dirname(os.environ['TMPDIR']), ignore_errors=True)
print('deleted')`},
		// The kernel's parent is its init (the daemon itself is not even
		// visible from the kernel's pid namespace). The daemon is its own
		// process-group leader (the harness starts it so); the cell aims
		// only at its parent's group when that parent leads one, never at
		// whatever group pid 1 or the test runner is in.
		{name: "kills_the_daemon", code: `
import os, signal
d = os.getppid()
pg = os.getpgid(d)
targets = [(os.kill, d)] + ([(os.killpg, pg)] if pg == d > 1 else [])
for f, pid in targets:
    try:
        f(pid, signal.SIGKILL); print('SENT')
    except (PermissionError, ProcessLookupError) as e:
        print('refused', type(e).__name__)`, check: checkRefused},
		// kill(-1) reaches every process the kernel's uid may signal:
		// another owner's kernel and the daemon must not be among them.
		{name: "kill_everything", vmOnly: true, bystander: true, code: `
import os, signal
if os.getuid() == 0:
    print('SENT: kernel runs as root; kill(-1) not attempted')
else:
    try:
        os.kill(-1, signal.SIGKILL); print('SENT')
    except PermissionError as e:
        print('refused', type(e).__name__)`, check: checkNotRoot},
	}
}

// TestEscapes runs every hostile cell in its own capped daemon.
func TestEscapes(t *testing.T) {
	requireDaemon(t)
	for _, tc := range escapeCases() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.vmOnly {
				requireVM(t)
			}
			d := StartDaemon(t, capped())
			owner := "attacker"
			var victim Result
			if tc.bystander {
				victim = d.Run(t, "bystander", "x = 1")
			}
			timeout := tc.timeout
			if timeout == "" {
				timeout = "20s"
			}
			res := d.RunReq(t, ExecReq{Owner: owner, Code: tc.code, Timeout: timeout})
			t.Logf("attack result: status=%s exit=%d ended=%v oom=%v error=%.200q output=%.200q",
				res.Status, res.ExitCode, res.Kernel.Ended, res.Kernel.OOMKilled, res.Error, res.Output)
			if res.Status == "" {
				t.Fatalf("no status in the attack's result: %+v", res)
			}
			if tc.check != nil {
				tc.check(t, d, res)
			}
			assertServes(t, d, owner)
			owners := []string{owner}
			if tc.bystander {
				after := d.Run(t, "bystander", "print(x)")
				if after.Kernel.ID != victim.Kernel.ID || strings.TrimSpace(after.Output) != "1" {
					t.Errorf("the bystander's kernel %s did not survive the attack: now %s, output %q", victim.Kernel.ID, after.Kernel.ID, after.Output)
				}
				owners = append(owners, "bystander")
			}
			shutdownAndCheck(t, d, owners...)
		})
	}
}

// checkEscapedPid: the escaped process really ran outside the cell's
// session (it is alive now); AssertClean later proves it is gone.
func checkEscapedPid(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	pid := lastInt(res.Output)
	if res.Status != "success" || pid == 0 {
		t.Fatalf("the cell did not report its escaped pid: %+v", res)
	}
	// The kernel printed its pid-namespace pid; the host knows another.
	if host := hostPid(d, pid); host != 0 {
		pid = host
	} else {
		t.Fatalf("no process of the daemon's kernels has pid %d in its pid namespace", pid)
	}
	if !pidAlive(pid) {
		t.Fatalf("escaped pid %d is not running right after the cell; the test proves nothing", pid)
	}
}

// checkForgedIgnored: no forged frame was taken for the cell's reply: the
// cell ran to its end, as its first execution, and the forged frame's body
// stays plain output.
func checkForgedIgnored(t *testing.T, _ *Daemon, res Result) {
	t.Helper()
	if res.Status != "success" || !strings.Contains(res.Output, "after\n") || !strings.Contains(res.Output, `"stdout": "FORGED"`) ||
		res.Kernel.ExecutionCount != 1 {
		t.Errorf("forged frames changed the reply: status %q, execution_count %d, output %.300q", res.Status, res.Kernel.ExecutionCount, res.Output)
	}
}

func checkForkBomb(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	if n := countProcs(d); n > 64 {
		t.Errorf("%d processes of the kernel run under a pids cap of 64", n)
	}
	if res.Status == "success" && !strings.Contains(res.Output, "failed") {
		t.Errorf("bomb root reported nothing: %q", res.Output)
	}
}

func checkOOM(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	if strings.Contains(res.Output, "survived") {
		t.Fatalf("512 MiB allocation survived a 64MiB cap: %+v", res)
	}
	// A kernel that died is an error with exit -1; "ended" is reserved for
	// sys.exit, as in the reference.
	if !res.Kernel.OOMKilled || res.Status != "error" || res.ExitCode != -1 {
		t.Errorf("want status error, exit -1, kernel.oom_killed; got %q %d %+v (error %q)", res.Status, res.ExitCode, res.Kernel, res.Error)
	}
	if !strings.Contains(strings.ToLower(res.Error), "memory") {
		t.Errorf("the error does not say memory: %q", res.Error)
	}
}

func checkCapped(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	if len(res.Output) > 200_000 {
		t.Errorf("inline output is %d bytes; caps are 50,000 stdout + 10,000 stderr", len(res.Output))
	}
}

func checkTimedOut(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	if res.Status != "timeout" || res.ExitCode != -1 {
		t.Errorf("a stopped kernel must time out and be killed: status %q exit %d", res.Status, res.ExitCode)
	}
}

func checkRefused(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // a SIGKILL that got through lands at once
	if strings.Contains(res.Output, "SENT") || !d.Alive() {
		t.Fatalf("a cell could signal the daemon (output %q, daemon alive %v)", res.Output, d.Alive())
	}
}

func checkNotRoot(t *testing.T, d *Daemon, res Result) {
	t.Helper()
	if strings.Contains(res.Output, "kernel runs as root") {
		t.Errorf("the kernel runs as root: %q", res.Output)
	}
}

// TestStopsReadingStdin: a kernel that stops reading its stdin must not
// wedge the daemon: the next (large) cell times out and the kernel dies.
func TestStopsReadingStdin(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, capped())
	res := d.Run(t, "mute", muteStdin)
	if res.Status != "success" || !strings.HasPrefix(res.Output, "muted") || strings.HasPrefix(res.Output, "muted 0") {
		t.Fatalf("muting cell found no pipe to mute: %+v", res)
	}
	big := "x = '" + strings.Repeat("a", 2<<20) + "'\nprint(len(x))"
	res = d.RunReq(t, ExecReq{Owner: "mute", Code: big, Timeout: "5s"})
	if res.Status == "success" {
		t.Fatalf("a kernel that reads no stdin answered a 2 MiB cell: %+v", res.Kernel)
	}
	assertServes(t, d, "mute")
	shutdownAndCheck(t, d, "mute")
}
