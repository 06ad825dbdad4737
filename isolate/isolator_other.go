//go:build !linux

package isolate

import (
	"fmt"
	"os"
	"runtime"

	"github.com/kernpool/kernpool/pool"
)

// Isolator makes the Sandbox of each new kernel. Outside Linux there are no
// cgroups, uid switching or namespaces: kernels are confined by process
// group (Unix) or a Job Object (Windows).
type Isolator struct {
	core
}

// New validates cfg and reports what this platform cannot give kernels.
func New(cfg Config) (*Isolator, error) {
	i := &Isolator{}
	if err := i.init(cfg); err != nil {
		return nil, err
	}
	cfg = i.cfg
	for name, p := range cfg.Profiles {
		if p.NoNetwork || p.PIDNamespace {
			return nil, fmt.Errorf("profile %q asks for namespaces: %w", name, ErrUnsupported)
		}
	}
	i.report = platformReport(cfg)
	i.report.Isolation, i.report.DaemonUID = cfg.isolationMode(), os.Geteuid()
	i.report.Profiles = profileReports(cfg, initFacts{}, os.Geteuid())
	if err := i.report.enforce(); err != nil {
		return nil, err
	}
	if w := i.report.Warning(); w != "" {
		i.log.Warn("reduced kernel isolation", "detail", w)
	}
	return i, nil
}

func baseReport(cfg Config) Report {
	return Report{
		Platform:     runtime.GOOS,
		CgroupMode:   "none",
		CgroupReason: "cgroups exist only on Linux",
		NoNewPrivs:   false,
		Rlimits:      rlimitEnv(cfg.Rlimits),
	}
}

// reserve makes the confinement of one kernel; limits are checked
// against the ceiling even where they cannot be enforced.
func (i *Isolator) reserve(id, owner, mode string, lim Limits) (*Sandbox, error) {
	res, _, err := i.admit(id, mode, lim)
	if err != nil {
		return nil, err
	}
	defer i.mu.Unlock()
	return newSandbox(i, id, profileLimits(res))
}

// CheckAccess checks that interpreter exists and cwd ("" skips it) is a
// directory; kernels run as the daemon's own user here.
func (i *Isolator) CheckAccess(interpreter, cwd string) error {
	st, err := os.Stat(interpreter)
	if err != nil || st.IsDir() {
		return fmt.Errorf("interpreter %s: %w: not an existing file", interpreter, ErrAccess)
	}
	if cwd != "" {
		if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
			return fmt.Errorf("cwd %s: %w: not an existing directory", cwd, ErrAccess)
		}
	}
	return nil
}

// Close marks the isolator closed. Idempotent.
func (i *Isolator) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	return nil
}

// SandboxStats is all zero here: no kernel uids are scrubbed and no host
// paths are walked off Linux.
func (i *Isolator) SandboxStats() pool.SandboxStats { return pool.SandboxStats{} }
