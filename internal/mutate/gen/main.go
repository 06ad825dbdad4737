package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kernpool/kernpool/internal/mutate/overlay"
)

// ctx ends on SIGINT or SIGTERM (.ci/gremlins' --budget): the mutant in
// flight is stopped and left out of the report, to be tested next time.
var ctx context.Context

func main() {
	var stop context.CancelFunc
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run()
	stop()
	os.Exit(code)
}

type options struct {
	pkg, out, gremlins, only, retest, summary string
	testPkg, run                              string
	coef                                      float64
	floor, patience, budget                   time.Duration
	limit, sample                             int
	gocache                                   string
	cacheLimit                                byteSize
	fresh, report                             bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.pkg, "pkg", "", "package directory from the repository root (required)")
	flag.StringVar(&o.out, "out", filepath.Join(os.TempDir(), "kernpool-gremlins"), "where the report and the coverage map go")
	flag.StringVar(&o.gremlins, "gremlins", "go run github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0", "the command that runs gremlins")
	flag.Float64Var(&o.coef, "coefficient", 10, "a test in a mutant run times out at this many times its own time in the coverage run")
	flag.DurationVar(&o.floor, "floor", 60*time.Second, "the shortest timeout of a test in a mutant run")
	flag.DurationVar(&o.patience, "patience", 20*time.Second, "the tests' event waits in mutant runs (testenv.PatienceEnv)")
	flag.DurationVar(&o.budget, "budget", 0, "start no mutant after this long (0: no limit)")
	flag.IntVar(&o.limit, "limit", 0, "test at most this many mutants in this run (0: all)")
	flag.IntVar(&o.sample, "sample", 0, "test only this many of the mutants left, evenly spread (0: all)")
	flag.StringVar(&o.only, "only", "", "test only mutants whose \"MUTATOR file:line:col\" matches this regexp")
	flag.StringVar(&o.retest, "retest", "", "comma-separated statuses whose mutants are tested again (LIVED after a test was added)")
	flag.StringVar(&o.summary, "summary", "", "append the package's summary line to this file")
	flag.StringVar(&o.testPkg, "testpkg", "", "run every mutant against this package's tests (those -run names) instead of -pkg's covering ones")
	flag.StringVar(&o.run, "run", "", "with -testpkg: the regexp (go test -run) naming the tests every mutant runs")
	flag.StringVar(&o.gocache, "gocache", "", "gen's own build cache, the GOCACHE of every go command it runs (default: OUT/gocache); the user's is never written")
	o.cacheLimit = 8 << 30
	flag.Var(&o.cacheLimit, "cache-limit", "past this size (8GiB, 500M as in the config; 0: no limit) the build cache is trimmed between mutants")
	flag.BoolVar(&o.fresh, "recover", false, "rebuild the coverage map from scratch")
	flag.BoolVar(&o.report, "report", false, "test nothing: summarise the report")
	flag.Parse()
	return o
}

func run() int {
	o := parseFlags()
	if o.pkg == "" {
		fmt.Fprintln(os.Stderr, "gen: -pkg is required")
		return 2
	}
	if err := o.selfCheck(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		return 2
	}
	o.pkg = strings.TrimSuffix(o.pkg, "/")
	root, err := overlay.RepoRoot()
	if err == nil {
		err = os.MkdirAll(o.out, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		return 2
	}
	if err := mutateAll(root, o); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		return 1
	}
	return 0
}

// mutateAll tests the package's mutants not yet in its report, then
// summarises the report.
func mutateAll(root string, o options) error {
	name := strings.ReplaceAll(o.pkg, "/", "_")
	reportPath := filepath.Join(o.out, name+".select.txt")
	start := time.Now()
	r := &runner{root: root, pkg: o.pkg, coef: o.coef, floor: o.floor, patience: o.patience,
		fr: funcRanges{root: root}, src: sourceLines{root: root}, done: map[string]Entry{}}
	if o.testPkg != "" {
		r.other = &otherTests{pkg: strings.TrimSuffix(o.testPkg, "/"), run: o.run}
	}
	if !o.report {
		dir := o.gocache
		if dir == "" {
			dir = filepath.Join(o.out, "gocache")
		}
		var err error
		if r.cache, err = openCache(dir, int64(o.cacheLimit)); err != nil {
			return err
		}
		defer func() {
			if err := r.cache.close(); err != nil {
				fmt.Fprintln(os.Stderr, "gen: trimming the build cache:", err)
			}
		}()
		todo, err := r.plan(o, reportPath)
		if err != nil {
			return err
		}
		if err := r.testAll(o, reportPath, todo, start); err != nil {
			return err
		}
	}
	return summarise(root, o, reportPath, &r.src, time.Since(start))
}

// plan lists the mutants, keeps the report's entries that still apply
// and returns the mutants left to test.
func (r *runner) plan(o options, reportPath string) ([]Mutant, error) {
	var err error
	env := r.goEnv("")
	if r.info, err = listPkg(r.root, r.pkg, env); err != nil {
		return nil, err
	}
	ms, err := listMutants(r.root, r.pkg, o.gremlins, reportPath+".dry.json", r.info.excludes(), env)
	if err != nil {
		return nil, err
	}
	old, err := readReport(reportPath)
	if err != nil {
		return nil, err
	}
	var only *regexp.Regexp
	if o.only != "" {
		if only, err = regexp.Compile(o.only); err != nil {
			return nil, fmt.Errorf("-only: %w", err)
		}
	}
	selected := func(m Mutant) bool { return only == nil || only.MatchString(m.Mutator+" "+m.Pos()) }
	retest := strings.Split(o.retest, ",")
	have := map[string]Entry{}
	for _, e := range old {
		// -retest applies to the mutants -only selects; the rest are kept.
		if e.Code == r.src.line(e.File, e.Line) && !(slices.Contains(retest, e.Status) && selected(e.Mutant)) {
			have[e.key()] = e
		}
	}
	var kept []string
	var todo []Mutant
	for _, m := range ms {
		e, ok := have[Entry{Mutant: m}.key()]
		switch {
		case ok:
			kept = append(kept, e.String())
		case selected(m):
			todo = append(todo, m)
		}
	}
	// The report keeps, in gremlins' order, only entries that apply.
	if err := os.WriteFile(reportPath, []byte(strings.Join(append(kept, ""), "\n")), 0o644); err != nil {
		return nil, err
	}
	todo = sample(todo, o.sample)
	if o.limit > 0 && len(todo) > o.limit {
		todo = todo[:o.limit]
	}
	fmt.Printf("gen %s: %d mutants, %d in the report, %d to test\n", r.pkg, len(ms), len(kept), len(todo))
	return todo, nil
}

// sample returns n of ms, evenly spread (all when n is 0 or more than
// there are), so a sample of a package is the same on every run.
func sample(ms []Mutant, n int) []Mutant {
	if n <= 0 || n >= len(ms) {
		return ms
	}
	out := make([]Mutant, 0, n)
	for i := range n {
		out = append(out, ms[i*len(ms)/n])
	}
	return out
}

// testAll builds the coverage map and tests each mutant, appending each
// result to the report as it comes.
func (r *runner) testAll(o options, reportPath string, todo []Mutant, start time.Time) error {
	if len(todo) == 0 {
		return nil
	}
	var err error
	if r.work, err = os.MkdirTemp("", "kernpool-gen-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.work)
	if err := r.prepare(reportPath+".cover.json", o.fresh); err != nil {
		return err
	}
	f, err := os.OpenFile(reportPath, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for i, m := range todo {
		if o.budget > 0 && time.Since(start) > o.budget {
			fmt.Printf("gen: budget spent, %d mutants left untested\n", len(todo)-i)
			break
		}
		e, err := r.test(m)
		if ctx.Err() != nil {
			fmt.Printf("gen: interrupted, %d mutants left untested\n", len(todo)-i)
			break
		}
		if err != nil {
			return fmt.Errorf("%s %s, %d mutants left untested: %w", m.Mutator, m.Pos(), len(todo)-i, err)
		}
		if _, err := fmt.Fprintln(f, e.String()); err != nil {
			return err
		}
		fmt.Printf("%4d/%d %-11s %-22s %s (%d tests, %.1fs)\n", i+1, len(todo), e.Status, e.Mutator, e.Pos(), e.Tests, e.Secs)
	}
	return nil
}

// summarise prints the report's summary line and the survivors not
// recorded in equivalent.txt (also written to the report's .survivors).
func summarise(root string, o options, reportPath string, src *sourceLines, took time.Duration) error {
	es, err := readReport(reportPath)
	if err != nil {
		return err
	}
	ef, err := os.Open(filepath.Join(root, "internal/mutate/equivalent.txt"))
	if err != nil {
		return err
	}
	eqs, err := parseEquivalents(ef)
	ef.Close()
	if err != nil {
		return err
	}
	t := tally(es, eqs, src)
	secs := fmt.Sprint(int(took.Seconds()))
	if o.report {
		secs = "-"
	}
	line := t.summaryLine(o.pkg, secs)
	fmt.Printf("%-14s %6s %5s %10s %11s %9s %10s %6s\n%s\n", "package", "killed", "lived", "equivalent",
		"not-covered", "timed-out", "not-viable", "secs", line)
	if o.summary != "" {
		sf, err := os.OpenFile(o.summary, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintln(sf, line)
		sf.Close()
	}
	var surv []string
	for _, e := range t.Survivors {
		surv = append(surv, fmt.Sprintf("%s\t%s\t%s", e.Status, e.Mutator, e.Pos()))
	}
	fmt.Print(strings.Join(append(surv, ""), "\n"))
	return os.WriteFile(reportPath+".survivors", []byte(strings.Join(append(surv, ""), "\n")), 0o644)
}
