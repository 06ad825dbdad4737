package kernel

import (
	"os"
	"syscall"
	"testing"
)

// TestOnlyStdioFdsInChild plants an inheritable fd in the daemon, as a
// careless embedder's library would, and checks that no cell sees it.
// os.Open alone would not do: Go opens files close-on-exec, so the fd
// never reaches the child and the runner's closerange goes untested.
func TestOnlyStdioFdsInChild(t *testing.T) {
	requireProc(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	leaked, err := syscall.Dup(int(f.Fd())) // dup(2) clears FD_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leaked)
	k := startKernel(t, baseSpec(t), "")
	// The runner's only extra fds are its private, non-inheritable protocol
	// fds (requests, frames, stderr markers); listdir holds one more.
	r := mustExec(t, k, "import os, subprocess\n"+
		"extra = [int(fd) for fd in os.listdir('/proc/self/fd') if int(fd) > 2]\n"+
		"print(len(extra), sum(os.get_inheritable(fd) for fd in extra if os.path.exists('/proc/self/fd/%d' % fd)))\n"+
		"subprocess.run(['/bin/ls', '/proc/self/fd'])\n"+
		"subprocess.run(['/bin/cat'])\n"+
		"print(os.readlink('/proc/self/fd/0'))")
	// Python-level output comes first, then fd-level (ls's) output; ls
	// lists its own fds: 0-2 and the one it reads the directory with.
	if want := "4 0\n/dev/null\n0\n1\n2\n3\n"; r.Stdout != want {
		t.Fatalf("stdout %q, want %q", r.Stdout, want)
	}
}

// TestNoHostFdsLeftAfterKill: a kernel started and killed leaves no file
// descriptor open in the host, however many come and go (the daemon
// starts kernels for as long as it runs). A first kernel warms what the
// runtime opens once (its poller).
func TestNoHostFdsLeftAfterKill(t *testing.T) {
	requireProc(t)
	openFds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	requireGone(t, startKernel(t, baseSpec(t), ""))
	before := openFds()
	for range 3 {
		requireGone(t, startKernel(t, baseSpec(t), ""))
	}
	if after := openFds(); after != before {
		t.Fatalf("%d fds open after three kernels came and went, %d before", after, before)
	}
}
