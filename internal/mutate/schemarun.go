package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kernpool/kernpool/internal/mutate/overlay"
	"github.com/kernpool/kernpool/internal/testenv"
)

// schemata is a schemata build: one test binary per package for all the
// mutants placed in it (schema.go).
type schemata struct {
	dir    string
	placed map[int]bool // list indexes of the mutants placed (their ids: mutantID)
	bins   map[string]*schemaBin
}

// mutantID is the id that selects the mutant at list index i (0 selects
// none).
func mutantID(i int) int { return i + 1 }

// schemaBin is one package's test binary in a schemata build.
type schemaBin struct {
	pkg, path string
	err       error // build or baseline failure: its mutants run one build each
}

// use returns the binaries m runs in the schemata build, or nil when it
// runs one build of its own.
func (s *schemata) use(i int, m Mutation) []*schemaBin {
	if s == nil || !s.placed[i] {
		return nil
	}
	var bins []*schemaBin
	for _, p := range m.Pkgs {
		b := s.bins[p]
		if b == nil || b.err != nil {
			return nil
		}
		bins = append(bins, b)
	}
	return bins
}

// prepareSchemata writes the schemata overlay for ms, builds each named
// package's test binary once, jobs at a time, and runs each binary's named
// tests with no mutant selected: a test the rewrite broke would otherwise
// catch every mutant. A package whose build or baseline fails is named,
// and its mutants run one build each.
func (r *runner) prepareSchemata(ms []Mutation, jobs int) (*schemata, error) {
	start := time.Now()
	dir, err := os.MkdirTemp("", "kernpool-schemata-")
	if err != nil {
		return nil, err
	}
	s := &schemata{dir: dir, placed: map[int]bool{}, bins: map[string]*schemaBin{}}
	ov, err := r.writeSchemata(s, ms)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	runs := map[string][]string{}
	for i, m := range ms {
		if !s.placed[i] {
			continue
		}
		for _, p := range m.Pkgs {
			runs[p] = append(runs[p], "(?:"+m.Run+")")
		}
	}
	pkgs := make([]string, 0, len(runs))
	for p := range runs {
		pkgs = append(pkgs, p)
		s.bins[p] = &schemaBin{pkg: p, path: filepath.Join(dir, "bin", strconv.Itoa(len(pkgs))+".test")}
	}
	sort.Strings(pkgs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, jobs))
	for _, p := range pkgs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.bins[p].err = r.buildSchemaBin(s.bins[p], ov, strings.Join(runs[p], "|"))
		})
	}
	wg.Wait()
	placed := 0
	for i := range ms {
		if s.use(i, ms[i]) != nil {
			placed++
		}
	}
	for _, p := range pkgs {
		if err := s.bins[p].err; err != nil {
			fmt.Printf("schemata: %s runs its mutants one build each: %v\n", p, err)
		}
	}
	fmt.Printf("schemata: %d of %d mutants in %d test binaries, built and checked unmutated in %s; the others one build each\n",
		placed, len(ms), len(pkgs), time.Since(start).Round(100*time.Millisecond))
	return s, nil
}

// writeSchemata writes the rewritten files and the selector files, and the
// overlay naming them; it fills s.placed.
func (r *runner) writeSchemata(s *schemata, ms []Mutation) (string, error) {
	byFile := map[string][]schemaMutant{}
	for i, m := range ms {
		if schemaEligible(m) == "" {
			byFile[m.File] = append(byFile[m.File], schemaMutant{id: mutantID(i), find: m.Find, repl: m.Repl})
		}
	}
	replace := map[string]string{}
	n := 0
	write := func(abs string, b []byte) error {
		n++
		p := filepath.Join(s.dir, "src", strconv.Itoa(n)+"_"+filepath.Base(abs))
		replace[abs] = p
		return os.WriteFile(p, b, 0o600)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "src"), 0o700); err != nil {
		return "", err
	}
	for file, muts := range byFile {
		abs := filepath.Join(r.root, file)
		src, err := os.ReadFile(abs)
		if err != nil {
			continue // its mutants run one build each, which reports it
		}
		pkg, err := packageName(src)
		if err != nil {
			continue
		}
		out, done, _ := schematize(abs, src, muts)
		if len(done) == 0 {
			continue
		}
		if err := write(abs, out); err != nil {
			return "", err
		}
		sel := filepath.Join(filepath.Dir(abs), schemaSelector)
		if _, ok := replace[sel]; !ok {
			if err := write(sel, selectorFile(pkg)); err != nil {
				return "", err
			}
		}
		for _, id := range done {
			s.placed[id-1] = true
		}
	}
	return overlay.WriteJSON(s.dir, replace)
}

// buildSchemaBin builds b with the overlay and runs the named tests (run)
// in it with no mutant selected.
func (r *runner) buildSchemaBin(b *schemaBin, ov, run string) error {
	cmd := exec.Command("go", "test", "-c", "-vet=off", "-overlay="+ov, "-o", b.path, b.pkg)
	cmd.Dir = r.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, indent(tail(string(out), 8)))
	}
	if _, err := os.Stat(b.path); err != nil {
		return errors.New("go test -c made no test binary (no test files?)")
	}
	out, err := r.runBin(b, filepath.Join(filepath.Dir(b.path), "base"), 0, run, 0, 0)
	if err != nil {
		return fmt.Errorf("its named tests fail with no mutant selected: %v\n%s", err, indent(tail(out, 20)))
	}
	return nil
}

// runBin runs b's tests matching run with mutant id selected (0: none),
// through a hard link in its own directory so that runs at once select
// their own mutants.
func (r *runner) runBin(b *schemaBin, dir string, id int, run string, timeout, patience time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = r.timeout
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	exe := filepath.Join(dir, filepath.Base(b.path))
	if err := os.Link(b.path, exe); err != nil {
		return "", err
	}
	defer os.Remove(exe)
	if id != 0 {
		if err := os.WriteFile(exe+schemaSuffix, []byte(strconv.Itoa(id)), 0o600); err != nil {
			return "", err
		}
		defer os.Remove(exe + schemaSuffix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.paniconexit0", "-test.count=1", "-test.timeout="+timeout.String(), "-test.run="+run)
	if id != 0 {
		cmd.Args = append(cmd.Args, "-test.failfast")
	}
	// go test runs a test binary in its package's directory.
	cmd.Dir = filepath.Join(r.root, b.pkg)
	cmd.Env = os.Environ()
	if patience > 0 {
		cmd.Env = append(cmd.Env, testenv.PatienceEnv+"="+patience.String())
	}
	out, err := cmd.CombinedOutput()
	if r.verbose {
		fmt.Printf("$ %s (mutant %d)\n%s\n", strings.Join(cmd.Args, " "), id, out)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return string(out), fmt.Errorf("run %s: %w", b.pkg, err)
	}
	return string(out), err
}

// mutateSchema runs m's tests in the schemata binaries with its mutant
// selected. A miss there is checked again with a build of its own (a
// rewrite's effect on a test must not decide a verdict).
func (r *runner) mutateSchema(m Mutation, id int, bins []*schemaBin, dir string) result {
	start := time.Now()
	for _, b := range bins {
		out, err := r.runBin(b, filepath.Join(dir, "m"+strconv.Itoa(id)), id, m.Run, m.Timeout, r.patience)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return result{verdict: verdictCaught, took: time.Since(start), schema: true}
		}
		if err != nil && r.verbose {
			fmt.Printf("schemata: %s: %v\n%s\n", m.Name, err, out)
		}
	}
	res := r.mutate(m)
	res.took += time.Since(start)
	return res
}
