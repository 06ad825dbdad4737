package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kernpool/kernpool/isolate/kinit"
	"golang.org/x/sys/unix"
)

// DefaultInitPath is the binary re-executed as the kernel init step.
const DefaultInitPath = "/proc/self/exe"

// initReadyTimeout bounds how long a kernel's start waits for its init to
// report. Setup takes a few milliseconds, but creating a network namespace
// waits on the kernel's teardown of earlier ones (heavy kernel churn) and a
// v1 cgroup.procs write on an RCU grace period; on a loaded host both took
// over 10 s in the load test. Slow is better than a refused kernel; a
// stuck mount still cannot hang the pool.
const initReadyTimeout = 60 * time.Second

// initNamespaces are the namespaces every kernel gets from its init; net
// unless the profile keeps the host network.
const initNamespaces = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// initStep is the daemon's end of one kernel's init: the status pipe and
// what the init reported.
type initStep struct {
	status  *os.File // read end, until Release
	write   *os.File // the init's end, closed once it started
	pending []byte   // status bytes read past the ready line
	ready   *kinit.Ready
}

// InitBinary is the small init binary (cmd/kernpool-init) the daemon
// prefers, beside its own executable, over re-executing itself: it skips
// the package initialisation of the daemon's dependencies on every start.
const InitBinary = "kernpool-init"

// executable is os.Executable, a variable so that tests can put the
// daemon's binary in a dir of theirs.
var executable = os.Executable

// ResolveInitPath is the init the daemon runs: configured, else
// kernpool-init beside the running executable when it is a regular file
// owned by root (or the daemon's user) that nobody else can write, else
// DefaultInitPath (the daemon's own binary).
func ResolveInitPath(configured string) string {
	if configured != "" {
		return configured
	}
	self, err := executable()
	if err != nil {
		return DefaultInitPath
	}
	cand := filepath.Join(filepath.Dir(self), InitBinary)
	var st unix.Stat_t
	if unix.Stat(cand, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o022 != 0 || st.Mode&0o100 == 0 {
		return DefaultInitPath
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return DefaultInitPath
	}
	return cand
}

// initFlags are the clone flags of an init with or without the host network.
func initFlags(hostNet bool) uintptr {
	if hostNet {
		return initNamespaces
	}
	return initNamespaces | syscall.CLONE_NEWNET
}

// wrapInit turns cmd (the interpreter) into the init that will fork it:
// the init runs as root in new namespaces and gets its orders in the
// environment and a status pipe as fd 3. Rlimits, no_new_privs, v1
// placement and the uid switch move from the runner to the init.
func (s *Sandbox) wrapInit(cmd *exec.Cmd, staging string, placement []string) error {
	if os.Getenv(kinit.EnvConfig) != "" {
		return errors.New("init step: this process is itself a kernel init that did not dispatch (call kinit.Main first in main)")
	}
	cfg := kinit.Config{
		Path: cmd.Path, Args: cmd.Args, Dir: cmd.Dir, UID: s.uid, GID: s.gid,
		CgroupProcs: placement, Rlimits: initRlimits(s.iso.cfg.Rlimits),
		Network: s.profile.Network, TmpSize: s.profile.TmpSize, PtyMax: s.profile.PtyMax,
		Private: s.iso.hostPaths.Private, ReadOnly: s.iso.hostPaths.ReadOnly,
		Staging: staging, Hide: filepath.Dir(staging),
		Keep: []string{s.iso.cfg.StateDir, staging, cmd.Dir}, Peer: os.Getpid(), Seccomp: s.iso.seccomp,
		BaseMounts: s.iso.baseMounts, MemoryMerge: s.profile.MemoryMerge, NoReaper: s.iso.noReaper,
	}
	if cfg.MemoryMerge {
		cfg.HashSeed = s.iso.hashSeed
	}
	if s.group != nil {
		cfg.KillFile = s.group.KillFile()
	}
	initEnv, err := cfg.Env()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("init step: %w", err)
	}
	s.closeInit()
	s.init = &initStep{status: r, write: w}
	cmd.Path, cmd.Args = s.iso.initPath, []string{kinit.Arg0}
	cmd.Env = append(cmd.Env, initEnv...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr.Cloneflags |= initFlags(s.profile.Network)
	return nil
}

func initRlimits(rl []Rlimit) []kinit.Rlimit {
	out := make([]kinit.Rlimit, 0, len(rl))
	for _, r := range rl {
		out = append(out, kinit.Rlimit{Name: r.Name, Soft: r.Soft, Hard: r.Hard})
	}
	return out
}

// awaitInit closes the daemon's copy of the init's status end and waits
// for its first line: the kernel starts only once the init says every
// namespace, mount and the seccomp filter are in force.
func (st *initStep) awaitInit() error {
	if st.write != nil {
		_ = st.write.Close()
		st.write = nil
	}
	_ = st.status.SetReadDeadline(time.Now().Add(initReadyTimeout))
	buf := make([]byte, 0, 256)
	chunk := make([]byte, 256)
	for bytes.IndexByte(buf, '\n') < 0 {
		n, err := st.status.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			return fmt.Errorf("init step: no report from the init (%v); its stderr says why", err)
		}
	}
	line, rest, _ := bytes.Cut(buf, []byte{'\n'})
	st.pending = rest
	ready, failure, _, _, _ := kinit.ParseStatus(string(line))
	switch {
	case failure != "":
		return fmt.Errorf("init step: %s", failure)
	case ready == nil:
		return fmt.Errorf("init step: unexpected report %q", line)
	}
	st.ready = ready
	return nil
}

// exitStatus reads the rest of the status pipe after the init was reaped:
// how the interpreter ended, when the init saw it end.
func (st *initStep) exitStatus() (reported bool, code int, signal string) {
	_ = st.status.SetReadDeadline(time.Now().Add(time.Second))
	var buf bytes.Buffer
	buf.Write(st.pending)
	_, _ = buf.ReadFrom(st.status)
	_, _, exited, code, sig := kinit.ParseStatus(buf.String())
	if !exited {
		return false, 0, ""
	}
	if sig > 0 {
		return true, -1, unix.SignalName(syscall.Signal(sig))
	}
	return true, code, ""
}

func (s *Sandbox) closeInit() {
	if s.init == nil {
		return
	}
	for _, f := range []*os.File{s.init.status, s.init.write} {
		if f != nil {
			_ = f.Close()
		}
	}
	s.init.status, s.init.write = nil, nil
}

// Namespaces lists the namespaces the kernel's init reported it runs in
// (mnt, pid, ipc, uts, and net unless the profile keeps the host
// network); nil without the init step or before the kernel started.
func (s *Sandbox) Namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.init == nil || s.init.ready == nil {
		return nil
	}
	return append([]string(nil), s.init.ready.Namespaces...)
}

// MemoryMerge says whether the kernel's init reported its pages open to
// samepage merging.
func (s *Sandbox) MemoryMerge() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.init != nil && s.init.ready != nil && s.init.ready.MemoryMerge
}

// Seccomp says whether the kernel's init reported its seccomp filter in
// force (checked by the init, not assumed).
func (s *Sandbox) Seccomp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.init != nil && s.init.ready != nil && s.init.ready.Seccomp
}

// Supervisor is what its init reported supervises the kernel's
// interpreter: kinit.SupervisorReaper (the init exec'd into the small
// reaper) or kinit.SupervisorGo (its Go fallback); "" without the init
// step or before the kernel started.
func (s *Sandbox) Supervisor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.init == nil || s.init.ready == nil {
		return ""
	}
	return s.init.ready.Supervisor
}
