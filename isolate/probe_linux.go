package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"github.com/kernpool/kernpool/isolate/kinit"
)

// ProbeInit runs the kernel init step once, the way a kernel's starts, in
// probe mode: every namespace, the private tmpfs, /proc, loopback and the
// seccomp filter, which the init then tests (unshare(CLONE_NEWUSER) and
// keyctl must fail with EPERM). It returns nil when all of it works on this
// host, else an error naming what failed. initPath "" means
// ResolveInitPath("").
// serve and doctor call it (through New) before any kernel starts.
func ProbeInit(ctx context.Context, initPath string) error {
	if initPath == "" {
		initPath = ResolveInitPath("")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("init step: %w: namespaces and mounts need a root daemon", ErrUnsupported)
	}
	progs, err := compileSeccomp()
	if err != nil {
		return err
	}
	return probe(ctx, initPath, initFlags(false), progs)
}

// probeInit probes the init step when cfg asks for it: the facts every
// kernel of this host will get, or why it cannot (with the fix).
func probeInit(cfg Config) initFacts {
	if !cfg.InitStep {
		return initFacts{}
	}
	path := ResolveInitPath(cfg.InitPath)
	ctx, cancel := context.WithTimeout(context.Background(), initReadyTimeout)
	defer cancel()
	if err := ProbeInit(ctx, path); err != nil {
		return initFacts{Probed: true, Path: path, Why: err.Error() +
			" (run the daemon as root on a Linux kernel with namespaces and seccomp; a container needs CAP_SYS_ADMIN and an unconfined seccomp profile)"}
	}
	return initFacts{Probed: true, Works: true, Path: path, Namespaces: []string{"ipc", "mnt", "pid", "uts"}, Seccomp: true}
}

// probe runs the init in probe mode with the given clone flags and filters.
func probe(ctx context.Context, initPath string, flags uintptr, progs [][]byte) error {
	if os.Getenv(kinit.EnvConfig) != "" {
		return errors.New("init step: this process is itself a kernel init that did not dispatch (call kinit.Main first in main)")
	}
	env, err := kinit.Config{UID: -1, GID: -1, Probe: true, Peer: os.Getpid(), Seccomp: progs}.Env()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("init probe: %w", err)
	}
	defer r.Close()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, initPath)
	cmd.Args = []string{kinit.Arg0}
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		return fmt.Errorf("init probe: start %s in new namespaces: %w", initPath, err)
	}
	st := &initStep{status: r}
	waitErr := st.awaitInit()
	if err := cmd.Wait(); waitErr == nil && err != nil {
		waitErr = fmt.Errorf("init probe: %w (%s)", err, bytes.TrimSpace(stderr.Bytes()))
	}
	if waitErr != nil {
		return fmt.Errorf("%w (stderr: %q)", waitErr, bytes.TrimSpace(stderr.Bytes()))
	}
	for _, ns := range []string{"mnt", "pid", "ipc", "uts", "net"} {
		if !slices.Contains(st.ready.Namespaces, ns) {
			return fmt.Errorf("init probe: no %s namespace of its own", ns)
		}
	}
	if !st.ready.Seccomp {
		return errors.New("init probe: the seccomp filter is not in force")
	}
	return nil
}
