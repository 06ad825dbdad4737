package kernel

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Defaults for the Spec caps (DefaultMaxFrameBytes is derived from the
// runner's caps in caps.go).
const (
	DefaultRawStdoutCap = 1_000_000
	DefaultStderrCap    = 1_000_000
)

// runnerFile is the runner's name inside the staging dir.
const runnerFile = "runner.py"

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Start creates the kernel's staging dir, spawns the runner in its sandbox
// and returns once the process runs. ctx bounds only the start-up.
//
// Start takes ownership of spec.Sandbox: on error it has been killed and
// released, and the staging dir is gone.
func Start(ctx context.Context, spec Spec) (*Kernel, error) {
	return start(ctx, spec, "")
}

// start is Start with an optional fixed sentinel (tests forge frames with it).
func start(ctx context.Context, spec Spec, sentinel string) (*Kernel, error) {
	if err := validate(&spec); err != nil {
		releaseSandbox(spec.Sandbox)
		return nil, fmt.Errorf("kernel start: %w", err)
	}
	if err := ctx.Err(); err != nil {
		releaseSandbox(spec.Sandbox)
		return nil, fmt.Errorf("kernel start: %w", err)
	}
	if sentinel == "" {
		var err error
		if sentinel, err = newSentinel(); err != nil {
			releaseSandbox(spec.Sandbox)
			return nil, fmt.Errorf("kernel start: %w", err)
		}
	}
	k := &Kernel{
		id:        spec.ID,
		staging:   filepath.Join(spec.StateDir, "kernels", spec.ID),
		log:       spec.Logger.Named("kernel"),
		sb:        spec.Sandbox,
		sentinel:  sentinel,
		maxFrame:  spec.MaxFrameBytes,
		tailCap:   spec.TailBytes,
		caps:      spec.frameCaps(),
		capsEnv:   outputCapsValue(&spec),
		cell:      newCellState(spec.RawStdoutCap, spec.StderrCap, spec.TailBytes, spec.Budget()),
		exited:    make(chan struct{}),
		stdoutEOF: make(chan struct{}),
		done:      make(chan struct{}),
	}
	if err := k.spawn(&spec); err != nil {
		if k.cmd == nil { // else the reaper released it
			releaseSandbox(k.sb)
		}
		return nil, fmt.Errorf("kernel start: %w", err)
	}
	k.log.Debug("kernel started", "id", k.id, "pid", k.Pid())
	return k, nil
}

// validate rejects bad specs with a clear message and fills in defaults.
func validate(spec *Spec) error {
	switch {
	case !validID.MatchString(spec.ID):
		return fmt.Errorf("invalid kernel id %q: want 1-64 of [A-Za-z0-9_.-], not starting with a dot or dash", spec.ID)
	case spec.Interpreter == "" || !filepath.IsAbs(spec.Interpreter):
		return fmt.Errorf("interpreter %q is not an absolute path", spec.Interpreter)
	case spec.StateDir == "" || !filepath.IsAbs(spec.StateDir):
		return fmt.Errorf("state dir %q is not an absolute path", spec.StateDir)
	case spec.Cwd != "" && !filepath.IsAbs(spec.Cwd):
		return fmt.Errorf("cwd %q is not an absolute path", spec.Cwd)
	case spec.MaxFrameBytes < 0 || spec.StdoutCap < 0 || spec.RawStdoutCap < 0 || spec.StderrCap < 0 || spec.TailBytes < 0:
		return errors.New("negative MaxFrameBytes, StdoutCap, RawStdoutCap, StderrCap or TailBytes")
	}
	for name := range spec.Files {
		if err := checkFileName(name); err != nil {
			return err
		}
	}
	spec.fillCaps()
	if spec.Logger == nil {
		spec.Logger = hclog.NewNullLogger()
	}
	if spec.Sandbox == nil {
		spec.Sandbox = NewProcessGroup()
	}
	return nil
}

// releaseSandbox frees a sandbox whose kernel never ran.
func releaseSandbox(sb Sandbox) {
	if sb == nil {
		return
	}
	_ = sb.Kill()
	_, _ = sb.Release()
}

func newSentinel() (string, error) {
	b := make([]byte, 24) // 32 url-safe characters
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sentinel: %w", err)
	}
	return "@@KERNPOOL-" + base64.RawURLEncoding.EncodeToString(b) + "@@", nil
}

// writeStaging creates the staging dir (on the sandbox's own filesystem
// when it is a StagingMounter; mounted says it is), its tmp/, the runner's
// files and spec.Files.
func writeStaging(staging string, files map[string][]byte, sb Sandbox) (mounted bool, err error) {
	if err := os.MkdirAll(filepath.Dir(staging), 0o711); err != nil {
		return false, fmt.Errorf("create kernels dir: %w", err)
	}
	if err := os.Mkdir(staging, 0o700); err != nil {
		return false, fmt.Errorf("create staging dir: %w", err)
	}
	if m, ok := sb.(StagingMounter); ok {
		if mounted, err = m.MountStaging(staging); err != nil {
			return false, fmt.Errorf("mount staging dir: %w", err)
		}
	}
	return mounted, writeStagingFiles(staging, files)
}

// writeStagingFiles creates the staging dir's tmp/, the runner's files and
// spec.Files.
func writeStagingFiles(staging string, files map[string][]byte) error {
	if err := os.Mkdir(filepath.Join(staging, "tmp"), 0o700); err != nil {
		return fmt.Errorf("create staging tmp: %w", err)
	}
	for name, data := range runnerFiles {
		if err := writeFile(filepath.Join(staging, name), data); err != nil {
			return err
		}
	}
	for name, data := range files {
		if err := writeFile(filepath.Join(staging, name), data); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write staging file: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write staging file: %w", err)
	}
	return nil
}

// childEnv is spec.Env plus the setup's entries and the kernel's own
// variables, which replace any same-named entry. The secrets (the sentinel
// and the RPC token) never enter it: an environment stays readable in
// /proc/<pid>/environ after the runner deletes it from os.environ, so they
// travel on the request pipe instead (bootstrapLine); token is the RPC
// token found in env or setupEnv.
func childEnv(env, setupEnv []string, id, staging, caps string, home bool) (out []string, token string) {
	own := map[string]string{
		EnvKernelID:               id,
		EnvOutputCaps:             caps,
		"TMPDIR":                  filepath.Join(staging, "tmp"),
		"TMP":                     filepath.Join(staging, "tmp"),
		"TEMP":                    filepath.Join(staging, "tmp"),
		"PYTHONDONTWRITEBYTECODE": "1",
		"PYTHONIOENCODING":        "utf-8",
		"PYTHONUTF8":              "1",
		"PYTHONPATH":              staging,
	}
	if home {
		own["HOME"] = filepath.Join(staging, "tmp")
	}
	out = make([]string, 0, len(env)+len(setupEnv)+len(own))
	for _, kv := range append(append([]string(nil), env...), setupEnv...) {
		name, value, _ := strings.Cut(kv, "=")
		switch name {
		case EnvRPCToken:
			token = value
			continue
		case EnvSentinel:
			continue
		}
		if name == "PYTHONPATH" && value != "" {
			own[name] = staging + string(os.PathListSeparator) + value
			continue
		}
		if _, mine := own[name]; !mine {
			out = append(out, kv)
		}
	}
	names := make([]string, 0, len(own))
	for name := range own {
		names = append(names, name)
	}
	sort.Strings(names) // a stable environment is easier to debug
	for _, name := range names {
		out = append(out, name+"="+own[name])
	}
	return out, token
}

// bootstrapLine is the first line on the request pipe, read by the runner
// before any user code: "KERNPOOL1 <sentinel> <token or ->". Both values
// are URL-safe base64 (plus the sentinel's @@ and -), so no quoting.
func bootstrapLine(sentinel, token string) ([]byte, error) {
	if token == "" {
		token = "-"
	}
	for _, v := range []string{sentinel, token} {
		if v == "" || strings.ContainsAny(v, " \t\r\n") {
			return nil, fmt.Errorf("bootstrap: value %q cannot travel on the bootstrap line", v)
		}
	}
	return []byte("KERNPOOL1 " + sentinel + " " + token + "\n"), nil
}
