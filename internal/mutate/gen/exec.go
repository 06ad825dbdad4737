package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// pkgInfo is what go list says of the package under test.
type pkgInfo struct {
	ImportPath   string
	Dir          string
	GoFiles      []string // with CgoFiles appended by listPkg
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
	// IgnoredGoFiles are the files this system's build leaves out (build
	// constraints), test files included.
	IgnoredGoFiles []string
	Module         struct{ Path string }
}

// excludes are gremlins' -E regexps (paths from the package dir) for the
// package: its subpackages (each its own run) and the sources this
// system's build leaves out, as go list says, not guessed from file names
// (sandbox_unix.go is `unix && !linux`): their mutants never build here.
func (p *pkgInfo) excludes() []string {
	ex := []string{`/`}
	for _, f := range p.IgnoredGoFiles {
		if !strings.HasSuffix(f, "_test.go") {
			ex = append(ex, "^"+regexp.QuoteMeta(f)+"$")
		}
	}
	return ex
}

// listPkg runs go list in env (nil: gen's own).
func listPkg(root, pkg string, env []string) (*pkgInfo, error) {
	cmd := exec.Command("go", "list", "-json", "./"+pkg)
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./%s: %w", pkg, err)
	}
	var p pkgInfo
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, err
	}
	if len(p.XTestGoFiles) > 0 {
		// An external test package's tests are listed and run the same
		// way; only their declaring files are read from both lists.
		p.TestGoFiles = append(p.TestGoFiles, p.XTestGoFiles...)
	}
	// The package's own sources, this system's build of them: mutants of
	// other files never build here.
	p.GoFiles = append(p.GoFiles, p.CgoFiles...)
	return &p, nil
}

// goEnv is the environment of every go command and test binary run here:
// vet is the unit step's job (a mutant vet flags is not one a test
// killed); an overlay reaches the tests' own go builds through GOFLAGS,
// and gen's own build cache (-gocache) their builds too.
func (r *runner) goEnv(overlay string, extra ...string) []string {
	flags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -vet=off")
	if overlay != "" {
		flags += " -overlay=" + overlay
	}
	env := append(os.Environ(), "GOFLAGS="+flags)
	if r.cache != nil {
		env = append(env, "GOCACHE="+r.cache.dir)
	}
	return append(env, extra...)
}

// buildTest compiles pkg's test binary to bin.
func (r *runner) buildTest(pkg, bin, overlay string, extra ...string) (string, error) {
	args := append([]string{"test", "-c", "-o", bin}, extra...)
	cmd := exec.Command("go", append(args, "./"+pkg)...)
	cmd.Dir = r.root
	cmd.Env = r.goEnv(overlay)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runOutcome is how a test binary's run ended.
type runOutcome int

const (
	passed runOutcome = iota
	failed
	timedOut
)

// runTests runs bin's tests named in names (all when empty) in dir, and
// says whether they passed, failed or ran out of time.
func runTests(bin, dir string, names []string, timeout time.Duration, env []string, args ...string) (runOutcome, string, time.Duration) {
	all := []string{"-test.timeout", timeout.String(), "-test.failfast"}
	if len(names) > 0 {
		all = append(all, "-test.run", runPattern(names))
	}
	// The test binary's own -test.timeout panics with every goroutine's
	// stack; this bound only stops a binary that ignores it.
	ctx, cancel := context.WithTimeout(ctx, timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(all, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	ownGroup(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	switch {
	case err == nil:
		return passed, out.String(), took
	case ctx.Err() != nil || strings.Contains(out.String(), "panic: test timed out after"):
		return timedOut, out.String(), took
	}
	return failed, out.String() + "\n" + err.Error(), took
}

// runPattern is a -test.run regexp naming exactly these top-level tests.
func runPattern(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

// listTests returns the binary's tests, fuzz targets and examples that
// pattern matches (not its benchmarks, which no go test run executes).
func listTests(bin, dir, pattern string, env []string) ([]string, error) {
	cmd := exec.Command(bin, "-test.list", pattern)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %w", bin, err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if !strings.HasPrefix(n, "Benchmark") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// coverTest runs one test alone with coverage and returns the blocks it
// (and any helper process it re-executed, through GOCOVERDIR) executed.
func (r *runner) coverTest(bin, name string) (TestRun, error) {
	tmp, err := os.MkdirTemp(r.work, "cov-")
	if err != nil {
		return TestRun{}, err
	}
	defer os.RemoveAll(tmp)
	covdir := filepath.Join(tmp, "covdata")
	if err := os.Mkdir(covdir, 0o755); err != nil {
		return TestRun{}, err
	}
	prof := filepath.Join(tmp, "cover.out")
	outcome, out, took := runTests(bin, r.pkgDir(), []string{name}, 30*time.Minute, r.goEnv("", "GOCOVERDIR="+covdir),
		"-test.coverprofile", prof)
	t := TestRun{Name: name, Secs: took.Seconds(), Failed: outcome != passed}
	if t.Failed {
		fmt.Printf("cover: %s fails on the unmutated code (never selected):\n%s\n", name, indent(tail(out, 15)))
	}
	blocks := map[int]bool{}
	profs := []string{prof}
	if ents, _ := os.ReadDir(covdir); len(ents) > 0 {
		children := filepath.Join(tmp, "children.out")
		cmd := exec.Command("go", "tool", "covdata", "textfmt", "-i", covdir, "-o", children)
		cmd.Env = r.goEnv("")
		if o, err := cmd.CombinedOutput(); err != nil {
			return t, fmt.Errorf("covdata of %s: %v\n%s", name, err, o)
		}
		profs = append(profs, children)
	}
	for _, p := range profs {
		f, err := os.Open(p)
		if err != nil {
			if t.Failed {
				continue
			}
			return t, err
		}
		err = r.cm.addProfile(f, r.info.Module.Path+"/", blocks)
		f.Close()
		if err != nil {
			return t, err
		}
	}
	for b := range blocks {
		t.Blocks = append(t.Blocks, b)
	}
	sort.Ints(t.Blocks)
	return t, nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
