package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A kernel can be started before anyone owns it (a warm spare, pool's
// spares.go) and learn its owner's part later, in one Bind before its first
// cell. Preload imports a profile's modules, also before the first cell.
// Both are runner requests like Variables ("op" with a payload in "code"),
// answered with one reply frame; neither moves the cell counter.

// opGrace is how long a canceled bind or preload may take before the
// kernel is killed: no user code runs in either, so there is nothing to
// interrupt gracefully.
const opGrace = time.Millisecond

// ErrBound: Bind or Preload on a kernel that was bound already or ran a
// cell (its owner's code may have run: it must never meet another owner).
var ErrBound = errors.New("kernel: already bound or used")

// Binding is what a kernel started without an owner learns when it is
// claimed: the owner's part of a Spec.
type Binding struct {
	// Cwd is the working directory; empty keeps the staging dir. The runner
	// checks that it is the same directory (device and inode) the daemon
	// sees: a sandbox's private /tmp may hide the daemon's.
	Cwd string
	// Env is the complete environment as Spec.Env would have it. The
	// runner's os.environ is changed to match; /proc/<pid>/environ keeps
	// showing the start environment (which held none of the owner's values).
	Env []string
	// Files are written into the staging dir (0600, by the runner, as the
	// kernel's uid) before the first cell; names as in Spec.Files. Text only.
	Files map[string][]byte
	// Setup runs before the request is sent, as Spec.Setup does (the pool
	// opens the tool socket); its RPC endpoint and token reach
	// _kernpool_runtime, never os.environ.
	Setup func(staging string) (env []string, err error)
}

// bindRequest is the "bind" op's payload (runner.py, _bind).
type bindRequest struct {
	Cwd      string            `json:"cwd,omitempty"`
	Dev      uint64            `json:"dev,omitempty"`
	Ino      uint64            `json:"ino,omitempty"`
	Set      map[string]string `json:"set,omitempty"`
	Unset    []string          `json:"unset,omitempty"`
	Files    map[string]string `json:"files,omitempty"`
	Endpoint string            `json:"rpc_endpoint,omitempty"`
	Token    string            `json:"rpc_token,omitempty"`
}

// Bind gives a kernel that never ran a cell its owner's cwd, environment,
// files and tool endpoint. On a non-nil error the kernel must not be used
// (the caller kills it); ErrBound when it was bound or ran a cell before.
func (k *Kernel) Bind(ctx context.Context, b Binding) error {
	if b.Cwd != "" && !filepath.IsAbs(b.Cwd) {
		return fmt.Errorf("kernel bind: cwd %q is not an absolute path", b.Cwd)
	}
	req := bindRequest{Cwd: b.Cwd, Files: make(map[string]string, len(b.Files))}
	for name, data := range b.Files {
		if err := checkFileName(name); err != nil {
			return fmt.Errorf("kernel bind: %w", err)
		}
		if !utf8.Valid(data) {
			return fmt.Errorf("kernel bind: staging file %q is not UTF-8 text", name)
		}
		req.Files[name] = string(data)
	}
	if b.Cwd != "" {
		fi, err := os.Stat(b.Cwd)
		if err != nil {
			return fmt.Errorf("kernel bind: cwd: %w", err)
		}
		req.Dev, req.Ino = fileID(fi)
	}
	release, err := k.claimFresh("kernel bind")
	if err != nil {
		return err
	}
	defer release()
	var setupEnv []string
	if b.Setup != nil {
		if setupEnv, err = b.Setup(k.staging); err != nil {
			return fmt.Errorf("kernel bind: setup: %w", err)
		}
	}
	env, token := childEnv(b.Env, setupEnv, k.id, k.staging, k.capsEnv, k.home)
	req.Set, req.Unset = envDiff(k.env, env)
	req.Endpoint, req.Token = req.Set[EnvRPCEndpoint], token
	delete(req.Set, EnvRPCEndpoint)
	payload, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("kernel bind: %w", err)
	}
	if err := k.op(ctx, "bind", string(payload)); err != nil {
		return fmt.Errorf("kernel bind: %w", err)
	}
	k.env, k.bound = env, true
	return nil
}

// Preload imports modules (dotted names) in the kernel before its first
// cell, so that a cell's import of them is a dictionary lookup. An import
// that fails is an error carrying its exception; the kernel must then not
// be used.
func (k *Kernel) Preload(ctx context.Context, modules []string) error {
	if len(modules) == 0 {
		return nil
	}
	for _, m := range modules {
		if !ValidModuleName(m) {
			return fmt.Errorf("kernel preload: %q is not a module name", m)
		}
	}
	release, err := k.claimFresh("kernel preload")
	if err != nil {
		return err
	}
	defer release()
	if err := k.op(ctx, "preload", strings.Join(modules, "\n")); err != nil {
		return fmt.Errorf("kernel preload: %w", err)
	}
	return nil
}

// ValidModuleName reports whether s is a dotted Python module name of
// ASCII identifiers ("email.mime.text").
func ValidModuleName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || (part[0] >= '0' && part[0] <= '9') {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
				return false
			}
		}
	}
	return true
}

// claimFresh takes the kernel's cell slot for a bind or preload: only
// while it is alive, idle, unbound and never ran a cell.
func (k *Kernel) claimFresh(op string) (release func(), err error) {
	if err := k.acquire(op); err != nil {
		return nil, err
	}
	if k.seq > 0 || k.bound {
		k.busy.Store(false)
		return nil, fmt.Errorf("%s: %w", op, ErrBound)
	}
	return func() { k.busy.Store(false) }, nil
}

// op sends one runner op and waits for its reply; a reply other than "ok"
// is an error carrying the runner's traceback. The caller holds busy.
func (k *Kernel) op(ctx context.Context, name, payload string) error {
	k.ops++
	id := name[:1] + strconv.Itoa(k.ops)
	line, err := json.Marshal(map[string]string{"id": id, "op": name, "code": payload})
	if err != nil {
		return err
	}
	k.cell.begin(k.seq, id, nil) // the runner's counter does not move
	rep, _, err := k.run(ctx, append(line, '\n'), Cell{Grace: opGrace})
	k.cell.end()
	if err != nil {
		return err
	}
	if rep.Status != "ok" {
		return fmt.Errorf("the runner refused: %s", strings.TrimSpace(rep.Traceback))
	}
	return nil
}

// envDiff is what turns environment from into to: the entries to set and
// the names to remove.
func envDiff(from, to []string) (set map[string]string, unset []string) {
	old := make(map[string]string, len(from))
	for _, kv := range from {
		name, value, _ := strings.Cut(kv, "=")
		old[name] = value
	}
	set = map[string]string{}
	seen := make(map[string]bool, len(to))
	for _, kv := range to {
		name, value, _ := strings.Cut(kv, "=")
		seen[name] = true
		if v, ok := old[name]; !ok || v != value {
			set[name] = value
		}
	}
	for name := range old {
		if !seen[name] {
			unset = append(unset, name)
		}
	}
	slices.Sort(unset)
	return set, unset
}

// checkFileName refuses a staging file name that is not a plain name or
// that would replace the runner.
func checkFileName(name string) error {
	if _, ours := runnerFiles[name]; ours || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("invalid staging file name %q", name)
	}
	return nil
}
