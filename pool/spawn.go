package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// spawn starts a kernel for rq: environment, sandbox, tool listener and
// output filter, then kernel.Start. Everything acquired is released again
// when a later step fails. It runs outside the registry lock.
func (p *Pool) spawn(ctx context.Context, rq normalized) (*live, error) {
	id := newKernelID()
	env, scrubbed, err := p.buildEnv(rq)
	if err != nil {
		return nil, err
	}
	spec := kernel.Spec{
		ID:          id,
		Interpreter: rq.key.interpreter,
		Cwd:         rq.key.cwd,
		Env:         env,
		StateDir:    p.cfg.StateDir,
		Logger:      p.cfg.Logger, // kernel names its own sub-logger
	}
	uid := -1
	if p.cfg.Sandboxes != nil {
		sb, err := p.cfg.Sandboxes.NewSandbox(id, rq.key.owner, rq.key.mode, rq.limits)
		if err != nil {
			return nil, fmt.Errorf("%w: sandbox for kernel %s: %w", ErrSpawn, id, err)
		}
		spec.Sandbox, uid = sb, sb.UID()
	}
	var tools ToolServer
	if len(rq.tools) > 0 {
		spec.Files = map[string][]byte{"kernpool_tools.py": p.cfg.Tools.Stub(rq.tools)}
		spec.Setup = func(staging string) ([]string, error) {
			srv, err := p.cfg.Tools.Listen(staging, uid, rq.tools)
			if err != nil {
				return nil, fmt.Errorf("tool listener: %w", err)
			}
			tools = srv
			return []string{kernel.EnvRPCEndpoint + "=" + srv.Endpoint(), kernel.EnvRPCToken + "=" + srv.Token()}, nil
		}
	}
	k, err := kernel.Start(ctx, spec)
	if err != nil {
		p.abandonSpawn(id, tools)
		return nil, fmt.Errorf("%w: start kernel %s: %w", ErrSpawn, id, err)
	}
	if err := p.makeSpillDir(id, uid); err != nil {
		_ = k.Kill()
		p.abandonSpawn(id, tools)
		p.removeSpillDir(id)
		return nil, fmt.Errorf("%w: kernel %s: %w", ErrSpawn, id, err)
	}
	secrets := scrubbed
	if tools != nil {
		secrets = append(slices.Clip(secrets), tools.Token())
	}
	var filter OutputFilter = identityFilter{}
	if p.cfg.Output != nil {
		filter = p.cfg.Output.ForKernel(secrets)
	}
	if uid < 0 {
		uid = os.Getuid()
	}
	return &live{
		k: k, id: id, owner: rq.key.owner, mode: rq.key.mode, pid: k.Pid(), uid: uid,
		tools: tools, filter: filter, startedAt: time.Now(), isolation: k.Isolation(),
		limits: rq.limits, passthrough: rq.passthrough,
	}, nil
}

// buildEnv returns the kernel's environment and the secret values it
// scrubbed. Without an EnvBuilder it is the minimal daemon subset (see
// Config.Env). A refused passthrough is the request's fault: ErrBadRequest.
func (p *Pool) buildEnv(rq normalized) (env, scrubbed []string, err error) {
	if p.cfg.Env == nil {
		return minimalEnv(os.Environ(), runtime.GOOS), nil, nil
	}
	env, scrubbed, err = p.cfg.Env.Build(rq.key.mode, rq.passthrough)
	if err != nil {
		return nil, nil, badRequest(fmt.Errorf("kernel environment: %w", err))
	}
	return env, scrubbed, nil
}

// abandonSpawn releases what a failed spawn had acquired besides the
// sandbox: kernel.Start owns the sandbox and has killed and released it.
func (p *Pool) abandonSpawn(id string, tools ToolServer) {
	if tools == nil {
		return
	}
	if err := tools.Close(); err != nil {
		p.log.Warn("tool server close failed", "id", id, "error", err)
	}
}

// newKernelID returns "k" + 16 lowercase hex digits from crypto/rand.
func newKernelID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead).
	return "k" + hex.EncodeToString(b[:])
}
