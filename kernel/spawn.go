package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// spawn builds the staging dir and starts the runner (design.md, "One spawn
// path"). On error nothing it created survives; the caller releases the
// sandbox.
func (k *Kernel) spawn(spec *Spec) (err error) {
	if err := writeStaging(k.staging, spec.Files); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			_ = os.RemoveAll(k.staging)
		}
		return err
	}
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
	cmd.Env = childEnv(spec.Env, setupEnv, k.id, k.staging, k.sentinel)
	cmd.Dir = spec.Cwd
	if cmd.Dir == "" {
		cmd.Dir = k.staging
	}
	child, err := k.openPipes(cmd)
	if err != nil {
		return err
	}
	defer closeAll(child) // the child holds its own copies once started
	if err := k.sb.Prepare(cmd, k.staging); err != nil {
		k.closePipes()
		return fmt.Errorf("sandbox prepare: %w", err)
	}
	hardenProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		k.closePipes()
		return fmt.Errorf("start %s: %w", spec.Interpreter, err)
	}
	k.cmd = cmd
	startedErr := k.sb.Started(cmd.Process.Pid)
	k.readers.Add(2)
	go k.readStdout()
	go k.readStderr()
	go k.reap()
	if startedErr != nil {
		k.terminate(fmt.Errorf("kernel start: sandbox: %w", startedErr))
		<-k.done // the reaper released the sandbox and removed the staging dir
		return fmt.Errorf("sandbox started: %w", startedErr)
	}
	return nil
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
