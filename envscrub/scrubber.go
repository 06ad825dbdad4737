package envscrub

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// MinSecretLen is the shortest scrubbed value that is remembered for
// exact-value masking. Shorter values ("1", "true", "prod") are too likely
// to be ordinary words or numbers: masking every occurrence would corrupt
// output while protecting little; an assignment dump of a short secret is
// still caught by the NAME=value pattern.
const MinSecretLen = 8

// Scrubber builds kernel environments from the daemon's (parity §1). It is
// immutable after New and safe for concurrent use.
type Scrubber struct {
	global  []string
	perMode map[string][]string
	refuse  []refusal
	windows bool
	parent  func() []string
	install []string
	log     hclog.Logger
}

// New validates cfg and returns a Scrubber. A configured passthrough name
// that is refused (or reserved) is an error wrapping ErrRefused naming the
// variable and the rule; a malformed name wraps ErrInvalidName.
func New(cfg Config) (*Scrubber, error) {
	s := &Scrubber{
		windows: cfg.Windows || runtime.GOOS == "windows",
		parent:  cfg.Parent,
		install: slices.Clone(cfg.PoolInstallDirs),
		log:     cfg.Logger,
		perMode: make(map[string][]string, len(cfg.ModePassthrough)),
	}
	if s.parent == nil {
		s.parent = os.Environ
	}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	if !strings.HasSuffix(s.log.Name(), "envscrub") {
		s.log = s.log.Named("envscrub")
	}
	patterns := cfg.Refuse
	if patterns == nil {
		patterns = DefaultRefuse
	}
	for _, p := range patterns {
		r, err := newRefusal(p)
		if err != nil {
			return nil, err
		}
		s.refuse = append(s.refuse, r)
	}
	var errs []error
	if err := s.CheckPassthrough(cfg.Passthrough); err != nil {
		errs = append(errs, fmt.Errorf("global passthrough: %w", err))
	}
	s.global = slices.Clone(cfg.Passthrough)
	for mode, names := range cfg.ModePassthrough {
		if err := s.CheckPassthrough(names); err != nil {
			errs = append(errs, fmt.Errorf("mode %q passthrough: %w", mode, err))
		}
		s.perMode[mode] = slices.Clone(names)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckPassthrough is the registration-time check of passthrough names (a
// request's, or a config's): every bad name is reported, joined, each
// wrapping ErrRefused or ErrInvalidName.
func (s *Scrubber) CheckPassthrough(names []string) error {
	var errs []error
	for _, n := range names {
		if err := s.checkOne(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Scrubber) checkOne(name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("passthrough: %w", err)
	}
	if rule := s.refusedBy(strings.ToUpper(name)); rule != "" {
		return fmt.Errorf("passthrough %q %w by %s", name, ErrRefused, rule)
	}
	return nil
}

// refusedBy names the rule refusing upper (an upper-cased name), or "".
func (s *Scrubber) refusedBy(upper string) string {
	if strings.HasPrefix(upper, reservedPrefix) {
		return "the reserved prefix " + reservedPrefix
	}
	for _, r := range s.refuse {
		if r.match(upper) {
			if r.glob {
				return fmt.Sprintf("refusal pattern %q", r.pattern)
			}
			return fmt.Sprintf("refusal list entry %q", r.pattern)
		}
	}
	return ""
}

// Build returns the environment of a new kernel of mode with the request's
// extra passthrough names, judged by parity §1 rules 1-6 against the
// daemon's environment as it is now. The refusal list is checked again for
// every passthrough name (a refused one is an error wrapping ErrRefused and
// nothing is built). PYTHONPATH is rebuilt without empty entries and
// entries inside the pool's install; the kernel prepends its staging dir
// and adds its own variables. scrubbed holds the values of dropped
// variables that are secret by name or refused (MinSecretLen bytes or
// longer), plus credentials embedded in URL-shaped dropped values; they
// are never logged.
func (s *Scrubber) Build(mode string, passthrough []string) (env []string, scrubbed []string, err error) {
	names := make([]string, 0, len(s.global)+len(s.perMode[mode])+len(passthrough))
	names = append(append(append(names, s.global...), s.perMode[mode]...), passthrough...)
	if err := s.CheckPassthrough(names); err != nil {
		return nil, nil, err // the caller names the operation
	}
	pass := make(map[string]bool, len(names))
	for _, n := range names {
		pass[s.fold(n)] = true
	}
	var (
		kept    = map[string]int{} // name -> index in env (last value wins, as exec does)
		dropped = map[verdict][]string{}
		secrets = map[string]bool{}
	)
	for _, kv := range s.parent() {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue // "=C:=C:\\" drive variables and malformed entries
		}
		v := s.judge(name, pass)
		if !v.kept() {
			dropped[v] = append(dropped[v], name)
			remember(secrets, v, name, value)
			continue
		}
		if s.fold(name) == "PYTHONPATH" {
			value = s.filterPythonPath(value)
			if value == "" {
				continue
			}
		}
		entry := name + "=" + value
		if i, dup := kept[s.fold(name)]; dup {
			env[i] = entry
			continue
		}
		kept[s.fold(name)] = len(env)
		env = append(env, entry)
	}
	s.logDropped(mode, dropped)
	for v := range secrets {
		scrubbed = append(scrubbed, v)
	}
	sort.Strings(scrubbed)
	return env, scrubbed, nil
}

// judge applies rules 6 and 1-5 to one name.
func (s *Scrubber) judge(name string, pass map[string]bool) verdict {
	upper := strings.ToUpper(name)
	switch {
	case strings.HasPrefix(upper, reservedPrefix):
		return dropOther // the daemon's own settings: dropped, not secrets
	case s.refusedBy(upper) != "":
		return dropRefused
	case pass[s.fold(name)]:
		return keepPassthrough
	case secretSubstring(upper) != "":
		return dropSecret
	case hasSafePrefix(name, s.windows):
		return keepSafe
	case s.windows && windowsEssentials[upper]:
		return keepWindows
	default:
		return dropOther
	}
}

// remember records what output masking must know of a dropped value: the
// whole value when the name is secret by rule 2 or refused, and any
// credential inside a URL-shaped value. A refused name that is not secret
// by name (OPENAI_BASE_URL) keeps its whole value only when it is not a
// URL or path: masking "https://api.openai.com/v1" everywhere would
// corrupt output while the credential inside it is remembered anyway.
func remember(secrets map[string]bool, v verdict, name, value string) {
	whole := v == dropSecret || v == dropRefused
	if v == dropRefused && !IsSecretName(name) && (strings.Contains(value, "://") || strings.HasPrefix(value, "/")) {
		whole = false
	}
	if whole && len(value) >= MinSecretLen {
		secrets[value] = true
	}
	for _, c := range urlCredentials(value) {
		if len(c) >= MinSecretLen {
			secrets[c] = true
		}
	}
}

// fold is the identity of a name: upper-cased on Windows, where names are
// case-insensitive, as is.
func (s *Scrubber) fold(name string) string {
	if s.windows {
		return strings.ToUpper(name)
	}
	return name
}

func (s *Scrubber) logDropped(mode string, dropped map[verdict][]string) {
	if len(dropped) == 0 || !s.log.IsDebug() {
		return
	}
	for _, v := range []verdict{dropRefused, dropSecret, dropOther} {
		if names := dropped[v]; len(names) > 0 {
			sort.Strings(names)
			s.log.Debug("dropped environment variables", "mode", mode, "rule", v.String(), "names", names)
		}
	}
}
