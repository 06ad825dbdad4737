package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on the free-text parts of a key.
const (
	maxOwnerLen    = 256
	maxModeLen     = 64
	maxToolNameLen = 64
	maxTools       = 256
	defaultName    = "default"
)

// key identifies one kernel: every field is part of the identity, so two
// requests share a process only when all of them are equal.
type key struct {
	owner, mode, interpreter, cwd string
	// tools is the sorted, deduplicated tool set joined by "," (tool names
	// cannot contain a comma, so the join is unambiguous).
	tools string
	// session is the explicit session's id ("" for implicit keying): a
	// session's kernel is never another request's (sessions.go).
	session string
}

// normalized is a validated Request with its defaults applied.
type normalized struct {
	key         key
	tools       []string
	code        string
	reset       bool
	timeout     time.Duration
	passthrough []string
	limits      Limits
	budget      int
	handler     ToolHandler
	stream      func(Event)
	outputsDir  string
	// interpFI is the interpreter file as normalize found it (a spare
	// started from another file is stale).
	interpFI os.FileInfo
	// sessEnv is the session's env (set when its kernel starts), cellEnv
	// the request's (set for its cell only).
	sessEnv, cellEnv map[string]string
}

// normalize validates req against cfg and applies the defaults. Every
// error wraps ErrBadRequest and names the offending field.
func (p *Pool) normalize(req Request) (normalized, error) {
	var sessEnv map[string]string
	if req.Session != "" {
		var err error
		if req, sessEnv, err = p.applySession(req); err != nil {
			return normalized{}, err
		}
	}
	bad := func(format string, args ...any) (normalized, error) {
		return normalized{}, fmt.Errorf(""+format+": %w", append(args, ErrBadRequest)...)
	}
	owner, err := checkName("owner", req.Owner, maxOwnerLen)
	if err != nil {
		return normalized{}, err
	}
	mode, err := checkName("mode", req.Mode, maxModeLen)
	if err != nil {
		return normalized{}, err
	}
	if len(p.cfg.Modes) > 0 && mode != defaultName && !slices.Contains(p.cfg.Modes, mode) {
		return normalized{}, &UnknownModeError{Mode: mode, Known: slices.Clone(p.cfg.Modes)}
	}
	interp := req.Interpreter
	if interp == "" {
		interp = p.cfg.DefaultInterpreter
	}
	if interp == "" {
		return bad("no interpreter given and the pool has no default interpreter")
	}
	interp, interpFI, err := checkInterpreter(interp)
	if err != nil {
		return normalized{}, err
	}
	cwd, err := checkCwd(req.Cwd)
	if err != nil {
		return normalized{}, err
	}
	tools, err := checkTools(req.Tools)
	if err != nil {
		return normalized{}, err
	}
	if len(tools) > 0 && p.cfg.Tools == nil {
		return bad("tools %v requested but this pool has no tool server", tools)
	}
	if err := checkCellFields(req); err != nil {
		return normalized{}, err
	}
	if err := checkCeiling(req.Limits, p.cfg.Ceiling); err != nil {
		return normalized{}, err
	}
	if _, err := p.checkEnv("env", mode, req.Env); err != nil {
		return normalized{}, err
	}
	if err := checkOutputsDir(req.OutputsDir); err != nil {
		return normalized{}, err
	}
	n := normalized{
		key:         key{owner: owner, mode: mode, interpreter: interp, cwd: cwd, tools: strings.Join(tools, ","), session: req.Session},
		sessEnv:     sessEnv,
		cellEnv:     req.Env,
		interpFI:    interpFI,
		tools:       tools,
		code:        req.Code,
		reset:       req.Reset,
		timeout:     req.Timeout,
		passthrough: slices.Compact(slices.Sorted(slices.Values(req.Passthrough))),
		limits:      req.Limits,
		budget:      req.MaxToolCalls,
		handler:     req.ToolHandler,
		stream:      req.Stream,
		outputsDir:  req.OutputsDir,
	}
	p.fillDefaults(&n)
	return n, nil
}

// checkCellFields refuses the request's numbers and passthrough names
// that no pool setting could make valid.
func checkCellFields(req Request) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrBadRequest)...)
	}
	switch {
	case req.Timeout < 0:
		return bad("timeout must not be negative (got %s)", req.Timeout)
	case req.MaxToolCalls < 0:
		return bad("max_tool_calls must not be negative (got %d)", req.MaxToolCalls)
	case req.Limits.MemoryMax < 0 || req.Limits.PidsMax < 0 || req.Limits.CPUMax < 0:
		return bad("limits must not be negative")
	}
	for _, name := range req.Passthrough {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return bad("passthrough name %q is not an environment variable name", name)
		}
	}
	return nil
}

// fillDefaults gives a cell the pool's settings where the request left
// them zero, and caps its timeout at the pool's maximum.
func (p *Pool) fillDefaults(n *normalized) {
	if n.timeout == 0 {
		n.timeout = p.cfg.CellTimeout
	}
	n.timeout = min(n.timeout, p.cfg.MaxCellTimeout)
	if n.budget == 0 {
		n.budget = p.cfg.MaxToolCalls
	}
	if n.handler == nil {
		n.handler = refuseTools{}
	}
}

// checkName defaults an owner or mode to "default" and requires printable,
// bounded UTF-8 (they appear in logs, listings and URL paths).
func checkName(field, v string, limit int) (string, error) {
	if v == "" {
		return defaultName, nil
	}
	if len(v) > limit {
		return "", fmt.Errorf("%s is %d bytes long, the limit is %d: %w", field, len(v), limit, ErrBadRequest)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("%s is not valid UTF-8: %w", field, ErrBadRequest)
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return "", fmt.Errorf("%s %q contains a non-printable character: %w", field, v, ErrBadRequest)
		}
	}
	return v, nil
}

// checkInterpreter requires an absolute path to an existing executable
// regular file (symlinks followed) and returns it cleaned, with its stat.
func checkInterpreter(path string) (string, os.FileInfo, error) {
	if !filepath.IsAbs(path) {
		return "", nil, fmt.Errorf("interpreter must be an absolute path (got %q): %w", path, ErrBadRequest)
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if err != nil {
		return "", nil, fmt.Errorf("interpreter %s: %w: %w", path, ErrBadRequest, err)
	}
	if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("interpreter %s is not a regular file: %w", path, ErrBadRequest)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
		return "", nil, fmt.Errorf("interpreter %s is not executable: %w", path, ErrBadRequest)
	}
	return path, fi, nil
}

// checkCwd accepts "" (the kernel's staging dir) or an absolute path to an
// existing directory, returned cleaned.
func checkCwd(cwd string) (string, error) {
	if cwd == "" {
		return "", nil
	}
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("cwd must be an absolute path (got %q): %w", cwd, ErrBadRequest)
	}
	cwd = filepath.Clean(cwd)
	fi, err := os.Stat(cwd)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("cwd %s does not exist: %w", cwd, ErrBadRequest)
		}
		return "", fmt.Errorf("cwd %s: %w: %w", cwd, ErrBadRequest, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("cwd %s is not a directory: %w", cwd, ErrBadRequest)
	}
	return cwd, nil
}

// checkTools validates tool names ([A-Za-z_][A-Za-z0-9_]{0,63}) and returns
// them sorted and deduplicated.
func checkTools(tools []string) ([]string, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	if len(tools) > maxTools {
		return nil, fmt.Errorf("%d tools requested, the limit is %d: %w", len(tools), maxTools, ErrBadRequest)
	}
	for _, t := range tools {
		if !validToolName(t) {
			return nil, fmt.Errorf("tool name %q must match [A-Za-z_][A-Za-z0-9_]{0,63}: %w", t, ErrBadRequest)
		}
	}
	out := slices.Clone(tools)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func validToolName(s string) bool {
	if s == "" || len(s) > maxToolNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
