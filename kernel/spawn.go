package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
)

// spawn builds the staging dir and starts the runner (design.md, "One spawn
// path"). On error nothing it created survives; the caller releases the
// sandbox.
func (k *Kernel) spawn(spec *Spec) (err error) {
	home, err := writeStaging(k.staging, spec.Files, k.sb)
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			_ = os.RemoveAll(k.staging)
		}
		return err
	}
	k.home = home
	defer func() {
		if err != nil {
			_ = os.RemoveAll(k.staging)
		}
	}()
	var setupEnv []string
	if spec.Setup != nil {
		if setupEnv, err = spec.Setup(k.staging); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	cmd := exec.Command(spec.Interpreter, filepath.Join(k.staging, runnerFile))
	var token string
	cmd.Env, token = childEnv(spec.Env, setupEnv, k.id, k.staging, k.capsEnv, k.home)
	k.env = slices.Clone(cmd.Env) // before Prepare appends the runner's own
	boot, err := bootstrapLine(k.sentinel, token)
	if err != nil {
		return err
	}
	cmd.Dir = spec.Cwd
	if cmd.Dir == "" {
		cmd.Dir = k.staging
	}
	child, err := k.openPipes(cmd)
	if err != nil {
		return err
	}
	defer closeAll(child) // the child holds its own copies once started
	// Written before the start: far below the pipe's buffer, so it cannot
	// block, and it is the first line the runner reads.
	if _, err := k.stdin.Write(boot); err != nil {
		k.closePipes()
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := k.sb.Prepare(cmd, k.staging); err != nil {
		k.closePipes()
		return fmt.Errorf("sandbox prepare: %w", err)
	}
	hardenProcAttr(cmd)
	started := make(chan error, 1)
	go k.lifetime(cmd, started)
	if err := <-started; err != nil {
		k.closePipes()
		return fmt.Errorf("start %s: %w", spec.Interpreter, err)
	}
	if err := k.sb.Started(cmd.Process.Pid); err != nil {
		k.terminate(fmt.Errorf("kernel start: sandbox: %w", err))
		<-k.done // the reaper released the sandbox and removed the staging dir
		return fmt.Errorf("sandbox started: %w", err)
	}
	return nil
}

// lifetime starts the runner from a goroutine locked to its OS thread for
// the kernel's whole life, then reaps it. Pdeathsig fires when the thread
// that forked the child exits, and Go ends a thread whose goroutine exits
// while locked to it (some libraries do that, e.g. around setns); this
// thread ends only after the kernel was reaped. It costs no extra thread:
// the reaper blocks one in wait4 anyway.
func (k *Kernel) lifetime(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
	if err := cmd.Start(); err != nil {
		started <- err
		return
	}
	k.cmd = cmd
	k.readers.Add(2)
	go k.readStdout()
	go k.readStderr()
	started <- nil
	k.reap()
}

// openPipes creates stdin/stdout/stderr pipes; it returns the child's ends.
func (k *Kernel) openPipes(cmd *exec.Cmd) ([]*os.File, error) {
	var child []*os.File
	var parent []*os.File
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(child)
			closeAll(parent)
			return nil, fmt.Errorf("pipe: %w", err)
		}
		if i == 0 {
			child, parent = append(child, r), append(parent, w)
		} else {
			child, parent = append(child, w), append(parent, r)
		}
	}
	growPipe(parent[1])
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	k.stdin, k.stdoutR, k.stderrR = parent[0], parent[1], parent[2]
	k.stdinW = newPipeWriter(k.stdin)
	return child, nil
}

func (k *Kernel) closePipes() {
	closeAll([]*os.File{k.stdin, k.stdoutR, k.stderrR})
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}
