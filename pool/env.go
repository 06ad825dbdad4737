package pool

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Request environments (Request.Env, SessionSpec.Env): values a caller
// gives a kernel, beside the names the daemon passes through from its own
// environment. A session's values are set when its kernel starts, a
// request's for its cell only (the runner restores the previous values
// when the cell ends). Every value of MinMaskedLen bytes or more is masked
// in the kernel's output from then on, like a scrubbed secret: a cell may
// have copied it into a global.

// MinMaskedLen is the shortest request env value that is masked in output
// (envscrub.MinSecretLen: shorter values are too likely ordinary words).
const MinMaskedLen = 8

// maxMaskedEnv and maxMaskedEnvBytes bound the request env values one
// kernel masks (their number, their bytes): each cell may bring new ones,
// and the filter of a kernel holds them all.
const (
	maxMaskedEnv      = 1024
	maxMaskedEnvBytes = 1 << 20
)

// reservedEnvNames are names a request may not set: the kernel sets them
// itself (kernel.childEnv), or they change how the interpreter or the
// dynamic linker start, which must stay the daemon's choice.
var reservedEnvNames = []string{"HOME", "TMPDIR", "TMP", "TEMP"}

// reservedEnvPrefixes are name prefixes a request may not set (compared
// upper-cased): kernpool's own variables, the interpreter's startup
// settings and the dynamic linker's.
var reservedEnvPrefixes = []string{"KERNPOOL_", "PYTHON", "LD_", "DYLD_"}

// EnvChecker is implemented by EnvBuilders that judge request env names
// (envscrub.Scrubber): a name refused by the refusal list, or secret by
// name and not passed through by mode's profile, is an error.
type EnvChecker interface {
	CheckEnvNames(mode string, names []string) error
}

// checkEnv validates one request env map against the bounds and the
// naming rules and returns its sorted names. field names it in errors.
func (p *Pool) checkEnv(field, mode string, env map[string]string) ([]string, error) {
	if len(env) == 0 {
		return nil, nil
	}
	lim := p.cfg.Sessions
	if len(env) > lim.MaxEnvNames {
		return nil, fmt.Errorf("%s has %d names, the limit is %d: %w", field, len(env), lim.MaxEnvNames, ErrBadRequest)
	}
	names := slices.Sorted(maps.Keys(env))
	total := 0
	for _, name := range names {
		v := env[name]
		total += len(name) + len(v)
		if err := checkEnvName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%s: the value of %s holds a NUL byte or invalid UTF-8: %w", field, name, ErrBadRequest)
		}
	}
	if total > lim.MaxEnvBytes {
		return nil, fmt.Errorf("%s holds %d bytes of names and values, the limit is %d: %w", field, total, lim.MaxEnvBytes, ErrBadRequest)
	}
	if c, ok := p.cfg.Env.(EnvChecker); ok {
		if err := c.CheckEnvNames(mode, names); err != nil {
			return nil, badRequest(err)
		}
	}
	return names, nil
}

// checkEnvName requires a portable name ([A-Za-z_][A-Za-z0-9_]*, at most
// 128 bytes) that is not reserved.
func checkEnvName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("env name %q must be 1 to 128 bytes long: %w", name, ErrBadRequest)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return fmt.Errorf("env name %q must match [A-Za-z_][A-Za-z0-9_]*: %w", name, ErrBadRequest)
		}
	}
	upper := strings.ToUpper(name)
	if slices.Contains(reservedEnvNames, upper) {
		return fmt.Errorf("env name %s is set by the kernel itself: %w", name, ErrBadRequest)
	}
	for _, pre := range reservedEnvPrefixes {
		if strings.HasPrefix(upper, pre) {
			return fmt.Errorf("env name %s is reserved (prefix %s): %w", name, pre, ErrBadRequest)
		}
	}
	return nil
}

// envEntries renders env as NAME=value entries in name order.
func envEntries(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	return out
}

// maskable are env's values that output masking must know.
func maskable(env map[string]string) []string {
	var out []string
	for _, v := range env {
		if len(v) >= MinMaskedLen {
			out = append(out, v)
		}
	}
	return out
}

// maskCellEnv makes lv's filter mask the values of the cell's env too,
// for the kernel's life. Called under the slot's semaphore (the filter's
// other users, cells and Variables, hold it as well).
func (p *Pool) maskCellEnv(lv *live, env map[string]string) error {
	var fresh []string
	for _, v := range maskable(env) {
		if !slices.Contains(lv.secrets, v) && !slices.Contains(fresh, v) {
			fresh = append(fresh, v)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	size := 0
	for _, v := range fresh {
		size += len(v)
	}
	if lv.masked+len(fresh) > maxMaskedEnv {
		return fmt.Errorf("kernel %s masks %d env values already, the limit is %d; reset it: %w", lv.id, lv.masked, maxMaskedEnv, ErrBadRequest)
	}
	if lv.maskedBytes+size > maxMaskedEnvBytes {
		return fmt.Errorf("kernel %s masks %d bytes of env values already, the limit is %d; reset it: %w", lv.id, lv.maskedBytes, maxMaskedEnvBytes, ErrBadRequest)
	}
	lv.masked += len(fresh)
	lv.maskedBytes += size
	lv.secrets = append(slices.Clip(lv.secrets), fresh...)
	lv.filter = p.filterFor(lv.secrets, lv.tools)
	p.mu.Lock()
	p.rememberMasksLocked(lv.key, fresh, time.Now())
	p.mu.Unlock()
	return nil
}
