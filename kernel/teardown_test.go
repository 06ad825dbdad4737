//go:build unix

package kernel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// execErr runs code under ctx (a deadline kills at once, timeout_action
// "kill"; a cancellation interrupts first) and requires an error wrapping
// want; the kernel must then be dead, released and gone.
func execErr(t *testing.T, k *Kernel, ctx context.Context, code string, want error) error {
	t.Helper()
	rep, err := k.Exec(ctx, Cell{Code: code, KillOnTimeout: true, Grace: 100 * time.Millisecond})
	if !errors.Is(err, want) {
		t.Fatalf("exec %q: reply %+v, error %v; want %v", code, rep, err, want)
	}
	select {
	case <-k.Done():
	default:
		t.Fatalf("kernel not released when Exec returned %v", err)
	}
	if !errors.Is(k.Err(), want) {
		t.Fatalf("Err() = %v, want %v", k.Err(), want)
	}
	if alive(k.Pid()) {
		t.Fatalf("kernel pid %d alive after %v", k.Pid(), err)
	}
	if _, err := k.Exec(context.Background(), Cell{Code: "1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("exec after death: %v, want ErrClosed", err)
	}
	return err
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import subprocess; child = subprocess.Popen(['/bin/sleep', '60'])")
	child := atoi(t, mustExec(t, k, "child.pid").Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	execErr(t, k, ctx, "import time; time.sleep(60)", ErrTimeout)
	if alive(child) {
		t.Fatalf("child %d of the kernel survived the timeout", child)
	}
}

func TestCancelKillsKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The cell ignores SIGINT (then says so): the cancellation's interrupt
	// gives way to the kill after the grace.
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ignoring', flush=True)\ntime.sleep(60)"
	var once sync.Once
	rep, err := k.Exec(ctx, Cell{Code: code, Grace: 100 * time.Millisecond, Stream: func(Event) { once.Do(cancel) }})
	if !errors.Is(err, ErrCanceled) {
		t.Fatalf("reply %+v, err %v; want ErrCanceled", rep, err)
	}
	<-k.Done()
	if !errors.Is(k.Err(), ErrCanceled) {
		t.Fatalf("Err() = %v", k.Err())
	}
}

func TestForgedFrames(t *testing.T) {
	t.Run("marker followed by a non-number is output", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), testSentinel)
		code := "import os\nos.write(1, b'a\\n" + testSentinel + " xyz\\nb\\n" + testSentinel + " 12x\\n')\nNone"
		r := mustExec(t, k, code)
		want := "a\n" + testSentinel + " xyz\nb\n" + testSentinel + " 12x\n"
		if r.Stdout != want {
			t.Fatalf("stdout %q, want %q", r.Stdout, want)
		}
		mustExec(t, k, "1") // still in sync
	})
	t.Run("non-object frame", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), testSentinel)
		err := execErr(t, k, context.Background(), "import os, time\nos.write(1, b'\\n"+testSentinel+" 3\\n[1]')\ntime.sleep(60)", ErrProtocol)
		if !strings.Contains(err.Error(), "frame is not a JSON object") {
			t.Fatalf("error %q lacks the detail", err)
		}
	})
	t.Run("oversized header refused before the body", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), testSentinel)
		// The kernel then writes nothing: a host that read the body would hang
		// until the 60 s context ends and report ErrTimeout instead.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err := execErr(t, k, ctx, "import os, time\nos.write(1, b'\\n"+testSentinel+" 1099511627776\\n')\ntime.sleep(120)", ErrProtocol)
		if !strings.Contains(err.Error(), "a reply frame of 1099511627776 bytes exceeds the 13971712-byte limit") {
			t.Fatalf("error %q lacks the detail", err)
		}
	})
	t.Run("frame for another request", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), testSentinel)
		body := `{"id":"99","status":"ok"}`
		code := "import os, time\nos.write(1, b'\\n" + testSentinel + " " + itoa(len(body)) + "\\n" + strings.ReplaceAll(body, `"`, `\"`) + "')\ntime.sleep(60)"
		execErr(t, k, context.Background(), code, ErrProtocol)
	})
}

func TestHostileKernelsCannotHangExec(t *testing.T) {
	t.Run("closes and redirects fd 1 and 2", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), "")
		r := mustExec(t, k, "import os\nos.close(1)\nos.dup2(os.open(os.devnull, os.O_WRONLY), 2)\nprint('py')")
		if r.Status != "ok" || r.Stdout != "py\n" {
			t.Fatalf("reply %+v", r)
		}
		mustExec(t, k, "1")
	})
	t.Run("closes every output fd", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), "")
		// Every fd on the stdout pipe, the runner's private one included:
		// stdout reaches EOF while the runner lives, which is killed after
		// a grace period.
		execErr(t, k, context.Background(), "import os, time\nout = os.readlink('/proc/self/fd/1')\n"+
			"for fd in os.listdir('/proc/self/fd'):\n"+
			"    if os.path.exists('/proc/self/fd/' + fd) and os.readlink('/proc/self/fd/' + fd) == out:\n"+
			"        os.close(int(fd))\n"+
			"time.sleep(60)", ErrProtocol)
	})
	t.Run("closes the runner's private fds", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), "")
		// Either the request reader finds its fd gone first (and kills the
		// group, as when the host dies) or the reply cannot be written (the
		// runner dies and says why): both end the kernel, neither hangs.
		_, err := k.Exec(context.Background(), Cell{Code: "import os\nos.closerange(3, 4096)"})
		var death *DeathError
		if !errors.As(err, &death) {
			t.Fatalf("error %v, want a DeathError", err)
		}
		if death.Signal != "SIGKILL" && !strings.Contains(death.Stderr, "Bad file descriptor") {
			t.Fatalf("death %+v: neither the group kill nor EBADF", death)
		}
	})
	t.Run("floods stderr", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), "")
		r := mustExec(t, k, "import os\nos.write(2, b'x' * 50_000_000)\nNone")
		if len(r.Stderr) != DefaultStderrCap {
			t.Fatalf("stderr %d bytes, want the %d cap", len(r.Stderr), DefaultStderrCap)
		}
		mustExec(t, k, "1")
	})
	t.Run("stops reading stdin", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), "")
		// The runner's request fd now is a pipe nobody writes: once its
		// reader returns from its current read it never reads the host's
		// pipe again.
		var st syscall.Stat_t
		rc, err := k.stdin.SyscallConn() // not Fd(): that would make the pipe blocking
		if err != nil {
			t.Fatal(err)
		}
		if cerr := rc.Control(func(fd uintptr) { err = syscall.Fstat(int(fd), &st) }); cerr != nil || err != nil {
			t.Fatal(cerr, err)
		}
		mustExec(t, k, "import os\nr, w = os.pipe()\n"+
			"for fd in os.listdir('/proc/self/fd'):\n"+
			"    if os.path.exists('/proc/self/fd/' + fd) and os.readlink('/proc/self/fd/' + fd) == 'pipe:["+strconv.FormatUint(st.Ino, 10)+"]':\n"+
			"        os.dup2(r, int(fd))")
		// The write of the 4 MiB request blocks (nobody reads the pipe)
		// until the deadline, which must come before the kernel's 1 s
		// closed-stdout grace. The code is built first: a deadline that
		// passed before Exec began would leave the kernel untouched (and
		// alive), which is Exec's contract, not what this case checks.
		code := "x = '" + strings.Repeat("a", 4<<20) + "'"
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		execErr(t, k, ctx, code, ErrTimeout)
	})
}

func TestDeathMidCell(t *testing.T) {
	cases := []struct {
		name, code string
		exit       int
		signal     string
	}{
		{"exit code", "import os\nos.write(2, b'dying loudly\\n')\nos._exit(3)", 3, ""},
		{"SIGKILL", "import os\nos.write(2, b'dying loudly\\n')\nos.kill(os.getpid(), 9)", -1, "SIGKILL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := startKernel(t, baseSpec(t), "")
			_, err := k.Exec(context.Background(), Cell{Code: c.code})
			var death *DeathError
			if !errors.As(err, &death) {
				t.Fatalf("error %v, want a *DeathError", err)
			}
			if death.ExitCode != c.exit || death.Signal != c.signal || death.OOMKilled {
				t.Fatalf("death %+v, want exit %d signal %q", death, c.exit, c.signal)
			}
			if !strings.Contains(death.Stderr, "dying loudly") {
				t.Fatalf("death stderr %q lacks the kernel's last words", death.Stderr)
			}
			if !errors.As(k.Err(), &death) || alive(k.Pid()) {
				t.Fatalf("Err() %v, alive %v", k.Err(), alive(k.Pid()))
			}
		})
	}
}

func TestDeathBeforeFirstCellReportsStderr(t *testing.T) {
	spec := baseSpec(t)
	spec.Env = append(spec.Env, "PYTHONHOME=/nonexistent-kernpool")
	k := startKernel(t, spec, "")
	<-k.Done()
	var death *DeathError
	if !errors.As(k.Err(), &death) || death.ExitCode == 0 || !strings.Contains(death.Stderr, "Fatal Python error") {
		t.Fatalf("Err() = %v (%+v)", k.Err(), death)
	}
	if _, err := k.Exec(context.Background(), Cell{Code: "1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("exec on a dead kernel: %v", err)
	}
}

func TestKillIdempotentAndConcurrent(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 1")
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- k.Kill() }()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("kill: %v", err)
		}
	}
	if !errors.Is(k.Err(), ErrClosed) || alive(k.Pid()) {
		t.Fatalf("after kill: Err %v alive %v", k.Err(), alive(k.Pid()))
	}
	if err := k.Kill(); err != nil {
		t.Fatalf("second kill: %v", err)
	}
}

func TestKillDuringExec(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	res := make(chan error, 1)
	go func() {
		_, err := k.Exec(context.Background(), Cell{Code: "import time; time.sleep(60)"})
		res <- err
	}()
	for !k.busy.Load() {
		time.Sleep(time.Millisecond)
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("exec during kill: %v, want ErrClosed", err)
	}
}
