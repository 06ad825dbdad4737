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
	if p.policy(rq.key.mode).Persist {
		env = append(slices.Clip(env), kernel.EnvCheckpointWarm+"=1") // its state will be saved
	}
	spec := kernel.Spec{
		ID:          id,
		Interpreter: rq.key.interpreter,
		Cwd:         rq.key.cwd,
		Env:         env,
		StateDir:    p.cfg.StateDir,
		Logger:      p.cfg.Logger, // kernel names its own sub-logger
	}
	if c, ok := p.cfg.Output.(spillCapper); ok {
		// Keep what a spill can hold (never less than the default: a
		// checkpoint reply travels in stdout).
		spec.StdoutCap = max(c.SpillCap(), kernel.CaptureChars)
		spec.RawStdoutCap = max(c.SpillCap(), kernel.DefaultRawStdoutCap)
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
		spec.Files, spec.Setup = p.toolStaging(rq, uid, &tools)
	}
	k, err := kernel.Start(ctx, spec)
	if err != nil {
		p.abandonSpawn(id, tools)
		return nil, fmt.Errorf("%w: start kernel %s: %w", ErrSpawn, id, err)
	}
	if err := k.Preload(ctx, p.preloadOf(rq.key.mode)); err != nil {
		_ = k.Kill()
		p.abandonSpawn(id, tools)
		return nil, fmt.Errorf("%w: kernel %s: %w", ErrSpawn, id, err)
	}
	if err := p.makeSpillDir(id, uid); err != nil {
		_ = k.Kill()
		p.abandonSpawn(id, tools)
		p.removeSpillDir(id)
		return nil, fmt.Errorf("%w: kernel %s: %w", ErrSpawn, id, err)
	}
	if uid < 0 {
		uid = os.Getuid()
	}
	return &live{
		k: k, id: id, owner: rq.key.owner, mode: rq.key.mode, pid: k.Pid(), uid: uid,
		tools: tools, filter: p.filterFor(scrubbed, tools), startedAt: time.Now(), isolation: k.Isolation(),
		limits: rq.limits, passthrough: rq.passthrough, secrets: scrubbed,
	}, nil
}

// toolStaging is what a kernel with tools needs in its staging dir: the
// generated kernpool_tools.py, and a setup step that opens its tool
// listener (owned by uid) and records it in *tools.
func (p *Pool) toolStaging(rq normalized, uid int, tools *ToolServer) (map[string][]byte, func(string) ([]string, error)) {
	files := map[string][]byte{"kernpool_tools.py": p.cfg.Tools.Stub(rq.tools)}
	return files, func(staging string) ([]string, error) {
		srv, err := p.cfg.Tools.Listen(staging, uid, rq.tools)
		if err != nil {
			return nil, fmt.Errorf("tool listener: %w", err)
		}
		*tools = srv
		return []string{kernel.EnvRPCEndpoint + "=" + srv.Endpoint(), kernel.EnvRPCToken + "=" + srv.Token()}, nil
	}
}

// filterFor is a kernel's output filter, masking the values its
// environment scrubbed and its RPC token.
func (p *Pool) filterFor(scrubbed []string, tools ToolServer) OutputFilter {
	if p.cfg.Output == nil {
		return identityFilter{}
	}
	secrets := scrubbed
	if tools != nil {
		secrets = append(slices.Clip(secrets), tools.Token())
	}
	return p.cfg.Output.ForKernel(secrets)
}

// preloadOf is mode's preload list (nil: none).
func (p *Pool) preloadOf(mode string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sp.warm[mode].Preload
}

// buildEnv returns the kernel's environment and the secret values it
// scrubbed. Without an EnvBuilder it is the minimal daemon subset (see
// Config.Env). A refused passthrough is the request's fault: ErrBadRequest.
func (p *Pool) buildEnv(rq normalized) (env, scrubbed []string, err error) {
	if p.cfg.Env == nil {
		env = minimalEnv(os.Environ(), runtime.GOOS)
	} else if env, scrubbed, err = p.cfg.Env.Build(rq.key.mode, rq.passthrough); err != nil {
		return nil, nil, badRequest(fmt.Errorf("kernel environment: %w", err))
	}
	// A session's own values come last: they win over a passed-through
	// name, as the later entry of an environment does.
	if len(rq.sessEnv) > 0 {
		env = append(slices.Clip(env), envEntries(rq.sessEnv)...)
		scrubbed = append(slices.Clip(scrubbed), maskable(rq.sessEnv)...)
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
