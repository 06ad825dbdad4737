package main

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kernpool/kernpool/internal/mutate/overlay"
	"github.com/kernpool/kernpool/internal/testenv"
)

const (
	verdictCaught  = "caught"
	verdictMissed  = "MISSED"
	verdictInvalid = "INVALID"
)

type result struct {
	verdict string
	detail  string
	took    time.Duration
	// schema says the schemata build decided it (a catch there); else a
	// build of the mutant's own did.
	schema bool
}

type runner struct {
	root    string
	timeout time.Duration
	verbose bool
	// patience shortens the tests' event waits (testenv.PatienceEnv) in
	// mutant runs: a test that catches a mutant by waiting for an event
	// that never comes would otherwise spend the full wait, minutes per
	// mutation. Baseline runs keep the full wait.
	patience time.Duration
	// schema, when set, holds the schemata build the mutants placed in it
	// run in (schemarun.go); the others get one build each.
	schema *schemata
}

// mutateAll tests every mutation, jobs at a time, and yields the results
// in list order as each becomes available (so a long run shows progress).
func (r *runner) mutateAll(ms []Mutation, jobs int) iter.Seq2[int, result] {
	return func(yield func(int, result) bool) {
		jobs = max(1, min(jobs, len(ms)))
		done := make([]chan result, len(ms))
		for i := range done {
			done[i] = make(chan result, 1)
		}
		next := make(chan int)
		stop := make(chan struct{})
		defer close(stop)
		for range jobs {
			go func() {
				for i := range next {
					done[i] <- r.mutateOne(ms, i)
				}
			}()
		}
		go func() {
			defer close(next)
			for i := range ms {
				select {
				case next <- i:
				case <-stop:
					return
				}
			}
		}()
		for i := range ms {
			if !yield(i, <-done[i]) {
				return
			}
		}
	}
}

// mutateOne tests ms[i]: in the schemata build when it is placed there,
// else with a build of its own.
func (r *runner) mutateOne(ms []Mutation, i int) result {
	if bins := r.schema.use(i, ms[i]); bins != nil {
		return r.mutateSchema(ms[i], mutantID(i), bins, r.schema.dir)
	}
	return r.mutate(ms[i])
}

// mutate applies m through an overlay and runs its tests.
func (r *runner) mutate(m Mutation) result {
	start := time.Now()
	res := func(v, d string) result { return result{verdict: v, detail: d, took: time.Since(start)} }
	src, err := os.ReadFile(filepath.Join(r.root, m.File))
	if err != nil {
		return res(verdictInvalid, err.Error())
	}
	if n := bytes.Count(src, []byte(m.Find)); n != 1 {
		return res(verdictInvalid, fmt.Sprintf("snippet %q occurs %d times in %s, want exactly once", m.Find, n, m.File))
	}
	mutant := bytes.Replace(src, []byte(m.Find), []byte(m.Repl), 1)
	dir, err := os.MkdirTemp("", "kernpool-mutate-")
	if err != nil {
		return res(verdictInvalid, err.Error())
	}
	defer os.RemoveAll(dir)
	ov, err := overlay.Write(dir, filepath.Join(r.root, m.File), mutant)
	if err != nil {
		return res(verdictInvalid, err.Error())
	}
	out, err := r.goTest(ov, m.Tags, m.Run, m.Pkgs, m.Timeout, r.patience)
	switch {
	case err == nil:
		return res(verdictMissed, fmt.Sprintf("go test %s -run '%s' passed with the mutant", strings.Join(m.Pkgs, " "), m.Run))
	case buildFailed(out):
		return res(verdictInvalid, "the mutant does not compile:\n"+indent(tail(out, 8)))
	}
	return res(verdictCaught, "")
}

// baseline runs, per package and tag set, the union of the named tests on
// the unmutated tree, jobs packages at a time: they must pass, or every
// mutation would look caught. Results print in package order.
func (r *runner) baseline(ms []Mutation, jobs int) error {
	type key struct{ pkg, tags string }
	runs := map[key][]string{}
	for _, m := range ms {
		for _, p := range m.Pkgs {
			k := key{p, m.Tags}
			runs[k] = append(runs[k], "(?:"+m.Run+")")
		}
	}
	keys := make([]key, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].pkg+keys[i].tags < keys[j].pkg+keys[j].tags })
	type outcome struct {
		out  string
		err  error
		took time.Duration
	}
	done := make([]chan outcome, len(keys))
	sem := make(chan struct{}, max(1, jobs))
	for i, k := range keys {
		done[i] = make(chan outcome, 1)
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			out, err := r.goTest("", k.tags, strings.Join(runs[k], "|"), []string{k.pkg}, 0, 0)
			done[i] <- outcome{out, err, time.Since(start)}
		}()
	}
	var first error
	for i, k := range keys {
		o := <-done[i] // every run is waited for: none outlives the check
		switch {
		case o.err != nil && first == nil:
			first = fmt.Errorf("tests of %s fail on the unmutated tree:\n%s", k.pkg, indent(tail(o.out, 20)))
		case o.err == nil:
			fmt.Printf("baseline ok    %s (%s)\n", k.pkg, o.took.Round(100*time.Millisecond))
		}
	}
	return first
}

func (r *runner) goTest(overlay, tags, run string, pkgs []string, timeout, patience time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = r.timeout
	}
	args := []string{"test", "-count=1", "-timeout", timeout.String(), "-run", run}
	if overlay != "" {
		// One failing test is a catch: the rest need not run. go vet runs
		// once over the unmutated tree (CI's first step); its pass over
		// every mutant's package took seconds a mutant and caught nothing.
		args = append(args, "-failfast", "-vet=off")
	}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, pkgs...)
	// A mutant that hangs is stopped by go test's -timeout; this bound
	// only guards against go itself hanging.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.root
	cmd.Env = os.Environ()
	if overlay != "" {
		// Through GOFLAGS, not a flag: the integration tests build the
		// daemon with their own go build, which must get the mutant too
		// (with -overlay alone their daemon ran the unmutated code).
		cmd.Env = append(cmd.Env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+overlay))
	}
	if patience > 0 {
		cmd.Env = append(cmd.Env, testenv.PatienceEnv+"="+patience.String())
	}
	out, err := cmd.CombinedOutput()
	if r.verbose {
		fmt.Printf("$ go %s\n%s\n", strings.Join(args, " "), out)
	}
	return string(out), err
}

// buildFailed says whether go test failed to build rather than a test
// failing.
func buildFailed(out string) bool {
	return strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") ||
		strings.Contains(out, "# github.com/") && !strings.Contains(out, "--- FAIL")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	return "        " + strings.ReplaceAll(s, "\n", "\n        ")
}
