package kinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// forwarded are the signals the init passes on to the interpreter. SIGKILL
// and SIGSTOP cannot be caught; the daemon kills through the cgroup.
func forwarded() []os.Signal {
	return []os.Signal{
		syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT,
	}
}

// forkInterpreter starts the interpreter as the kernel uid, in its own
// process group, with only fds 0-2 and without the init's config.
func forkInterpreter(cfg Config) (int, error) {
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, EnvConfig+"=") || strings.HasPrefix(kv, EnvSeccomp+"=") {
			continue
		}
		name, value, _ := strings.Cut(kv, "=")
		if cfg.hostKillFile != "" && value == cfg.hostKillFile {
			kv = name + "=" + cfg.KillFile // the path in the kernel's cgroup namespace
		}
		if cfg.MemoryMerge && name == "PYTHONHASHSEED" {
			continue
		}
		env = append(env, kv)
	}
	if cfg.MemoryMerge {
		env = append(env, "PYTHONHASHSEED="+strconv.FormatUint(uint64(cfg.HashSeed), 10))
	}
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cfg.UID >= 0 {
		sys.Credential = &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), Groups: []uint32{}}
	}
	pid, err := syscall.ForkExec(cfg.Path, cfg.Args, &syscall.ProcAttr{
		Dir: cfg.Dir, Env: env, Files: []uintptr{0, 1, 2}, Sys: sys,
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", cfg.Path, err)
	}
	return pid, nil
}

// supervise forwards signals to the interpreter and reaps every process
// that ends in the kernel's pid namespace (orphans are re-parented to the
// init). When the interpreter ends it reports how and returns its exit
// code; the kernel then kills whatever is left in the namespace. It is
// the fallback of the reaper (reaper_amd64.asm), which does the same
// without the Go runtime. It writes ready (the ready line) once it
// forwards signals; unblock undoes execReaper's signal mask, after
// Notify, so that a signal held meanwhile is forwarded, not fatal.
func supervise(pid int, status *os.File, unblock func(), ready string) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded()...)
	unblock()
	_, _ = status.WriteString(ready)
	go func() {
		for s := range sigs {
			_ = syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			_, _ = status.WriteString("fail wait: " + err.Error() + "\n")
			return exitSetup
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Signaled():
			_, _ = status.WriteString("signal " + strconv.Itoa(int(ws.Signal())) + "\n")
			return 128 + int(ws.Signal())
		case ws.Exited():
			_, _ = status.WriteString("exit " + strconv.Itoa(ws.ExitStatus()) + "\n")
			return ws.ExitStatus()
		}
	}
}

// nsKinds are the namespaces the init checks, by /proc/self/ns name.
func nsKinds() []string { return []string{"mnt", "pid", "ipc", "uts", "net"} }

// ownNamespaces lists the namespaces this process does not share with
// peer, the daemon that started it (read in the host /proc, before /proc
// is replaced).
func ownNamespaces(peer int) ([]string, error) {
	if peer <= 0 {
		return nil, fmt.Errorf("read namespaces: no daemon pid to compare with")
	}
	var own []string
	for _, kind := range nsKinds() {
		mine, err := os.Readlink("/proc/self/ns/" + kind)
		if err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", kind, err)
		}
		host, err := os.Readlink("/proc/" + strconv.Itoa(peer) + "/ns/" + kind)
		if err != nil {
			return nil, fmt.Errorf("read daemon namespace %s: %w", kind, err)
		}
		if mine != host {
			own = append(own, kind)
		}
	}
	return own, nil
}

// requireNamespaces fails unless the init runs in every namespace the
// daemon asked for: a missing one must never go unnoticed.
func requireNamespaces(own []string, hostNet bool) error {
	want := []string{"mnt", "pid", "ipc", "uts"}
	if !hostNet {
		want = append(want, "net")
	}
	for _, w := range want {
		found := false
		for _, o := range own {
			found = found || o == w
		}
		if !found {
			return fmt.Errorf("namespaces: not in a %s namespace of its own", w)
		}
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("namespaces: pid %d, want 1 in a new pid namespace", os.Getpid())
	}
	return nil
}
