package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// shimProbeTimeout bounds the one run of a shim that asks it for the real
// interpreter (pyenv shims take ~100 ms).
const shimProbeTimeout = 15 * time.Second

// resolveInterpreter returns the absolute path of the default python3:
// the configured one, else the first python3 on PATH. A script (a
// pyenv-style shim: "#!" and not ELF) is resolved once, at start, to the
// binary it runs, by asking it for sys.executable; every kernel spawn then
// skips the shim's ~100 ms.
func resolveInterpreter(ctx context.Context, configured string, log hclog.Logger) (string, error) {
	name := configured
	if name == "" {
		name = "python3"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("resolve interpreter %q: %w", name, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", fmt.Errorf("resolve interpreter: %w", err)
	}
	if !isScript(path) {
		log.Info("default interpreter", "path", path)
		return path, nil
	}
	real, err := probeShim(ctx, path)
	if err != nil {
		// Keep the shim: slower per spawn, but it works.
		log.Warn("interpreter is a script and could not be resolved; using it as is", "path", path, "error", err)
		return path, nil
	}
	log.Info("default interpreter resolved through a shim", "shim", path, "path", real)
	return real, nil
}

// isScript reports whether path starts with "#!" (a shim) rather than
// being a native binary.
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return string(head) == "#!"
}

func probeShim(ctx context.Context, shim string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, shimProbeTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, shim, "-c", "import sys; print(sys.executable)")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("run %s: %w: %s", shim, err, strings.TrimSpace(errb.String()))
	}
	real := strings.TrimSpace(out.String())
	if !filepath.IsAbs(real) {
		return "", fmt.Errorf("%s reported sys.executable %q, not an absolute path", shim, real)
	}
	fi, err := os.Stat(real)
	if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s reported sys.executable %q, which is not an executable file", shim, real)
	}
	if isScript(real) {
		return "", fmt.Errorf("%s reported sys.executable %q, which is a script again", shim, real)
	}
	return real, nil
}

// usableInterpreter returns interp if check accepts it. Otherwise, when
// the interpreter was not configured explicitly, it tries every other
// python3 on PATH (shims resolved) and returns the first that check
// accepts: a root daemon whose first python3 is a pyenv shim into /root
// (0700) then falls back to the system python3 its kernel uids can run.
// The error is check's verdict on the first candidate.
func usableInterpreter(ctx context.Context, interp string, configured bool, check func(string) error, log hclog.Logger) (string, error) {
	if check == nil {
		return interp, nil
	}
	first := check(interp)
	if first == nil || configured {
		return interp, first
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never run a python3 from a relative PATH entry
		}
		cand := filepath.Join(dir, "python3")
		if fi, err := os.Stat(cand); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		real := cand
		if isScript(cand) {
			var err error
			if real, err = probeShim(ctx, cand); err != nil {
				continue
			}
		}
		if real == interp || check(real) != nil {
			continue
		}
		log.Warn("kernels cannot use the first python3 on PATH; using the next usable one",
			"unusable", interp, "reason", first, "path", real)
		return real, nil
	}
	return interp, first
}
