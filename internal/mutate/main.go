package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/kernpool/kernpool/internal/mutate/overlay"
)

func main() {
	os.Exit(run())
}

func run() int {
	list := flag.String("list", "internal/mutate/mutations.txt", "mutation list, relative to the repository root")
	sample := flag.Int("sample", 0, "run only this many mutations, evenly spread over the list (0: all)")
	only := flag.String("only", "", "run only mutations whose name matches this regexp")
	timeout := flag.Duration("timeout", 5*time.Minute, "go test -timeout for each run")
	baseline := flag.Bool("baseline", true, "first check the named tests pass on the unmutated tree")
	verbose := flag.Bool("v", false, "print the test output of every run")
	patience := flag.Duration("patience", 20*time.Second, "the tests' event waits in mutant runs (testenv.PatienceEnv; 0: the tests' own)")
	jobs := flag.Int("j", 1, "mutants tested at once, and baseline packages (each its own go test)")
	schema := flag.Bool("schemata", true, "test the mutants of package Go code in one build per test package (mutant schemata); false: one build per mutant")
	flag.Parse()

	root, err := overlay.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	ms, err := parseList(filepath.Join(root, *list))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	ms, err = selectMutations(ms, *only, *sample)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	r := &runner{root: root, timeout: *timeout, verbose: *verbose, patience: *patience}
	start := time.Now()
	if *baseline {
		if err := r.baseline(ms, *jobs); err != nil {
			fmt.Fprintln(os.Stderr, "mutate: baseline:", err)
			return 1
		}
	}
	if *schema {
		s, err := r.prepareSchemata(ms, *jobs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutate: schemata:", err)
			return 2
		}
		defer os.RemoveAll(s.dir)
		r.schema = s
	}
	caught, missed, broken := 0, 0, 0
	for i, v := range r.mutateAll(ms, *jobs) {
		m := ms[i]
		fmt.Printf("%3d/%d %-7s %-34s %s (%s)\n", i+1, len(ms), v.verdict, m.Name, m.File, v.took.Round(100*time.Millisecond))
		if v.verdict != verdictCaught {
			fmt.Printf("        %s\n        why: %s\n", v.detail, m.Why)
		}
		switch v.verdict {
		case verdictCaught:
			caught++
		case verdictMissed:
			missed++
		default:
			broken++
		}
	}
	fmt.Printf("%d caught, %d missed", caught, missed)
	if broken > 0 {
		fmt.Printf(", %d invalid (snippet not found exactly once, or the mutant does not compile)", broken)
	}
	fmt.Printf(" (%d mutations in %s)\n", len(ms), time.Since(start).Round(time.Second))
	if missed > 0 || broken > 0 {
		return 1
	}
	return 0
}

// selectMutations applies -only, then -sample (a fixed, evenly spread
// choice, so CI runs the same sample every time).
func selectMutations(ms []Mutation, only string, sample int) ([]Mutation, error) {
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return nil, fmt.Errorf("-only: %w", err)
		}
		var keep []Mutation
		for _, m := range ms {
			if re.MatchString(m.Name) {
				keep = append(keep, m)
			}
		}
		ms = keep
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no mutation selected")
	}
	if sample <= 0 || sample >= len(ms) {
		return ms, nil
	}
	out := make([]Mutation, 0, sample)
	for i := range sample {
		out = append(out, ms[i*len(ms)/sample])
	}
	return out, nil
}
