package kinit

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit codes of an init that could not set the kernel up.
const (
	exitSetup = 120 // setup failed; the status pipe says why
	exitUsage = 121 // no status pipe or no config: not started by the daemon
)

// init keeps the main goroutine of a process started as a kernel init on
// the main thread (the Go runtime guarantees that only for a lock taken
// during package initialisation): the daemon's parent-death signal is an
// attribute of that thread alone, so only an exec from it keeps the
// signal for the reaper, and the interpreter's Pdeathsig ends with the
// thread that forks it.
func init() {
	if len(os.Args) > 0 && os.Args[0] == Arg0 {
		runtime.LockOSThread()
	}
}

// Main runs the kernel init and exits when this process was started as
// one (argv[0] is Arg0 and EnvConfig is set); otherwise it returns at once.
// Call it first thing in main and in TestMain.
func Main() {
	if len(os.Args) == 0 || os.Args[0] != Arg0 {
		return
	}
	raw, ok := os.LookupEnv(EnvConfig)
	if !ok {
		return
	}
	// Everything below runs on this thread (the main one, see init):
	// no_new_privs is per thread, and the interpreter is forked from it.
	runtime.LockOSThread()
	os.Exit(run(raw, os.Getenv(EnvSeccomp)))
}

// run sets the kernel up, forks the interpreter and supervises it. It
// returns the init's exit code.
func run(raw, seccomp string) int {
	if _, err := unix.FcntlInt(StatusFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "kernpool init: no status pipe:", err)
		return exitUsage
	}
	status := os.NewFile(StatusFD, "kernpool-init-status")
	cfg, err := decode(raw, seccomp)
	if err == nil {
		// v1 placement first: nothing runs outside the kernel's cgroup.
		err = joinCgroups(cfg.CgroupProcs)
	}
	reaper := -1
	if err == nil && !cfg.Probe {
		// Before the seccomp filter; -1 (the error) keeps the Go supervisor.
		reaper, _ = newReaperFile()
	}
	var ready Ready
	if err == nil {
		ready, err = setup(&cfg)
	}
	if err != nil {
		fail(status, err)
		return exitSetup
	}
	if cfg.Probe {
		_, _ = status.WriteString(ready.line())
		return 0
	}
	pid, err := forkInterpreter(cfg)
	if err != nil {
		fail(status, err)
		return exitSetup
	}
	ready.Pid = pid
	// Returns only when the init is still this program (reaper off,
	// missing or refused): the Go supervisor then takes over. Either
	// writes the ready line only once it handles the forwarded signals:
	// the daemon sends none before that line.
	unblock, _ := execReaper(reaper, pid, ready, cfg.NoReaper)
	ready.Supervisor = SupervisorGo
	return supervise(pid, status, unblock, ready.line())
}

func fail(status *os.File, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintln(os.Stderr, "kernpool init:", msg)
	_, _ = status.WriteString("fail " + msg + "\n")
}

// setup confines this process (and so everything it forks): namespaces'
// contents, umask, rlimits, no_new_privs and the seccomp filter, in that
// order. It reports what is in force.
func setup(cfg *Config) (Ready, error) {
	var r Ready
	ns, err := ownNamespaces(cfg.Peer)
	if err != nil {
		return r, err
	}
	if err := requireNamespaces(ns, cfg.Network); err != nil {
		return r, err
	}
	cfg.hostKillFile = cfg.KillFile
	if cfg.KillFile, err = setupMounts(*cfg); err != nil {
		return r, err
	}
	if !cfg.Network {
		if err := loopbackUp(); err != nil {
			return r, err
		}
	}
	if err := unix.Sethostname([]byte("kernpool")); err != nil {
		return r, fmt.Errorf("sethostname: %w", err)
	}
	syscall.Umask(0o077)
	if err := setRlimits(cfg.Rlimits); err != nil {
		return r, err
	}
	merge := false
	if cfg.MemoryMerge {
		// Before the filter, which refuses this prctl to the kernel.
		if merge, err = enableMerge(); err != nil {
			return r, err
		}
	}
	if err := loadSeccomp(cfg.Seccomp); err != nil {
		return r, err
	}
	if err := checkSeccomp(); err != nil {
		return r, err
	}
	return Ready{Namespaces: ns, Seccomp: true, MemoryMerge: merge}, nil
}

func joinCgroups(files []string) error {
	for _, f := range files {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	return nil
}

// setRlimits applies the daemon's rlimits. syscall.Setrlimit (not unix's)
// also updates the RLIMIT_NOFILE value Go hands to children it forks.
func setRlimits(rl []Rlimit) error {
	for _, r := range rl {
		res, ok := rlimitResource(r.Name)
		if !ok {
			return fmt.Errorf("setrlimit %s: unknown resource", r.Name)
		}
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: r.Soft, Max: r.Hard}); err != nil {
			return fmt.Errorf("setrlimit %s: %w", r.Name, err)
		}
	}
	return nil
}

// rlimitResource maps a name of RlimitNames to its resource number.
func rlimitResource(name string) (int, bool) {
	switch name {
	case "core":
		return unix.RLIMIT_CORE, true
	case "nofile":
		return unix.RLIMIT_NOFILE, true
	case "nproc":
		return unix.RLIMIT_NPROC, true
	case "fsize":
		return unix.RLIMIT_FSIZE, true
	case "as":
		return unix.RLIMIT_AS, true
	case "data":
		return unix.RLIMIT_DATA, true
	case "stack":
		return unix.RLIMIT_STACK, true
	case "cpu":
		return unix.RLIMIT_CPU, true
	case "memlock":
		return unix.RLIMIT_MEMLOCK, true
	}
	return 0, false
}
