package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kernpool/kernpool/internal/mutate/overlay"
	"github.com/kernpool/kernpool/internal/testenv"
)

type runner struct {
	root, pkg string
	info      *pkgInfo
	work      string // temporary files of this run
	cm        *CoverMap
	cache     *goCache    // gen's own GOCACHE (nil: the user's)
	other     *otherTests // -testpkg: no coverage map, these tests run every mutant
	fr        funcRanges
	src       sourceLines
	coef      float64
	floor     time.Duration
	patience  time.Duration
	// done remembers, per change (file, offset, new token), a result: two
	// mutators that make the same change are tested once.
	done map[string]Entry
}

func (r *runner) pkgDir() string { return filepath.Join(r.root, r.pkg) }

// coverage loads the cached map at path, runs again the tests it lacks
// or whose file changed (all when a non-test file changed, or fresh), and
// saves it.
func (r *runner) coverage(path string, fresh bool) error {
	srcHash, err := hashFiles(r.pkgDir(), r.info.GoFiles)
	if err != nil {
		return err
	}
	testHash, err := hashFiles(r.pkgDir(), r.info.TestGoFiles)
	if err != nil {
		return err
	}
	decls, err := testDecls(r.pkgDir(), r.info.TestGoFiles)
	if err != nil {
		return err
	}
	cm, err := loadCoverMap(path)
	if err != nil || fresh || cm.Source != combined(srcHash) {
		cm = &CoverMap{}
		cm.index()
	}
	r.cm = cm
	bin := filepath.Join(r.work, "cover.test")
	if out, err := r.buildTest(r.pkg, bin, "", "-cover", "-covermode=set", "-coverpkg="+r.info.ImportPath); err != nil {
		return fmt.Errorf("building the coverage binary: %v\n%s", err, out)
	}
	names, err := listTests(bin, r.pkgDir(), ".", r.goEnv(""))
	if err != nil {
		return err
	}
	kept := map[string]TestRun{}
	for _, t := range cm.Tests {
		if t.File != "" && cm.TestFiles[t.File] == testHash[t.File] {
			kept[t.Name] = t
		}
	}
	cm.Tests = nil
	start := time.Now()
	for i, n := range names {
		t, ok := kept[n]
		if !ok {
			if t, err = r.coverTest(bin, n); err != nil {
				return err
			}
			t.File = decls[n]
			fmt.Printf("cover %3d/%d %-50s %6.1fs %5d blocks\n", i+1, len(names), n, t.Secs, len(t.Blocks))
		}
		cm.Tests = append(cm.Tests, t)
	}
	cm.Source, cm.TestFiles = combined(srcHash), testHash
	fmt.Printf("cover: %d tests, %d blocks executed (%s)\n", len(cm.Tests), len(cm.Blocks), time.Since(start).Round(time.Second))
	return cm.save(path)
}

// test runs one mutant against the tests that cover its line. An error
// is no verdict on the mutant (a full disk, a killed toolchain): gen
// stops, and the mutant, left out of the report, is tested next time.
func (r *runner) test(m Mutant) (Entry, error) {
	start := time.Now()
	e := Entry{Mutant: m, Code: r.src.line(m.File, m.Line)}
	end := func(st string) (Entry, error) {
		e.Status, e.Secs = st, time.Since(start).Seconds()
		return e, nil
	}
	if !slices.Contains(r.info.GoFiles, filepath.Base(m.File)) {
		// Another system's file: it never builds here, no test runs it.
		return end(stNotCovered)
	}
	var sel []int
	if r.other != nil {
		e.Tests = r.other.count
	} else {
		sel = r.cm.selectTests(m, r.fr.find)
		e.Tests = len(sel)
	}
	if e.Tests == 0 {
		return end(stNotCovered)
	}
	src, err := os.ReadFile(filepath.Join(r.root, m.File))
	if err != nil {
		return e, err
	}
	mutant, off, repl, err := apply(src, m)
	if err != nil {
		fmt.Println("   ", err)
		return end(stNotViable)
	}
	change := fmt.Sprintf("%s:%d:%s", m.File, off, repl)
	if prev, ok := r.done[change]; ok {
		e.Status = prev.Status
		return e, nil
	}
	if err := r.cache.trim(); err != nil {
		return e, fmt.Errorf("trimming the build cache: %w", err)
	}
	st, err := r.testMutant(e.File, mutant, sel)
	if err != nil {
		return e, err
	}
	e, _ = end(st)
	r.done[change] = e
	return e, nil
}

// testMutant builds the mutant through an overlay and runs sel on it.
func (r *runner) testMutant(file string, mutant []byte, sel []int) (string, error) {
	dir, err := os.MkdirTemp(r.work, "mutant-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	ov, err := overlay.Write(dir, filepath.Join(r.root, file), mutant)
	if err != nil {
		return "", err
	}
	if r.other != nil {
		return r.testOther(dir, ov)
	}
	bin := filepath.Join(dir, "mutant.test")
	if ok, err := r.buildMutant(r.pkg, bin, ov); !ok {
		return stNotViable, err
	}
	return r.runSelected(bin, ov, sel), nil
}

// alone is how many of a mutant's tests, the quickest, run one process
// each before the rest run in one: a killed mutant usually fails in its
// quickest tests, and a process per test costs about a second each for
// a lived mutant that runs them all.
const alone = 4

// runSelected runs the quickest selected tests one process each, then
// the rest in one process, and stops at the first failure or timeout: a
// killed mutant costs its quickest killing test, not every test before it
// in file order. A run's timeout is coef times its tests' own time in the
// coverage pass (where each ran alone), with a floor.
func (r *runner) runSelected(bin, overlay string, sel []int) string {
	sel = slices.Clone(sel)
	slices.SortStableFunc(sel, func(a, b int) int { return cmp.Compare(r.cm.Tests[a].Secs, r.cm.Tests[b].Secs) })
	env := r.goEnv(overlay, testenv.PatienceEnv+"="+r.patience.String())
	return r.runBatches(bin, env, batches(sel, alone))
}

// batches splits sel (quickest first) into its first n tests alone and
// the rest together.
func batches(sel []int, n int) [][]int {
	var out [][]int
	for i, t := range sel {
		if i >= n {
			return append(out, sel[i:])
		}
		out = append(out, []int{t})
	}
	return out
}

// runBatches runs each batch in one process, in order, and returns the
// status of the first that fails or times out (lived when none does).
func (r *runner) runBatches(bin string, env []string, bs [][]int) string {
	for _, b := range bs {
		var names []string
		var own float64
		for _, ti := range b {
			names = append(names, r.cm.Tests[ti].Name)
			own += r.cm.Tests[ti].Secs
		}
		timeout := max(r.floor, time.Duration(r.coef*own*float64(time.Second)))
		if st := mutantStatus(runTests(bin, r.pkgDir(), names, timeout, env)); st != stLived {
			return st
		}
	}
	return stLived
}

// mutantStatus is what one test run says of a mutant: killed when a test
// failed, timed out, else lived (so far).
func mutantStatus(outcome runOutcome, _ string, _ time.Duration) string {
	switch {
	case ctx.Err() != nil:
		return stTimedOut // interrupted: left out of the report
	case outcome == failed:
		return stKilled
	case outcome == timedOut:
		return stTimedOut
	}
	return stLived
}
