package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// otherTests is -testpkg: every mutant of -pkg runs the tests of another
// package that -run names. For code no test of its own package can cover:
// isolate/kinit runs in the init process isolate's tests start by
// re-executing their own binary, a process that never returns to write
// coverage. The user chooses the tests, so there is no coverage map.
type otherTests struct {
	pkg, run string
	count    int     // top-level tests -run selects
	secs     float64 // their run on the unmutated code
}

func (o *otherTests) dir(root string) string { return filepath.Join(root, o.pkg) }

// baseline builds the other package's test binary from the unmutated
// tree and runs the selected tests once: a test that fails there would
// kill every mutant, and their time sets a mutant run's timeout.
func (r *runner) baseline() error {
	ot := r.other
	bin := filepath.Join(r.work, "baseline.test")
	if out, err := r.buildTest(ot.pkg, bin, ""); err != nil {
		return fmt.Errorf("building %s's tests: %v\n%s", ot.pkg, err, out)
	}
	names, err := listTests(bin, ot.dir(r.root), ot.run, r.goEnv(""))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("-run %q selects no test of %s", ot.run, ot.pkg)
	}
	ot.count = len(names)
	env := r.goEnv("", testenv.PatienceEnv+"="+r.patience.String())
	outcome, out, took := runTests(bin, ot.dir(r.root), nil, 30*time.Minute, env, "-test.run", ot.run)
	if outcome != passed {
		return fmt.Errorf("%s -run %q fails on the unmutated code:\n%s", ot.pkg, ot.run, indent(tail(out, 15)))
	}
	ot.secs = took.Seconds()
	fmt.Printf("baseline: %s, %d tests matching %q, %.1fs\n", ot.pkg, ot.count, ot.run, ot.secs)
	return nil
}

// testOther builds the other package's test binary with the mutant's
// overlay and runs the chosen tests in one process.
func (r *runner) testOther(dir, ov string) (string, error) {
	ot := r.other
	bin := filepath.Join(dir, "mutant.test")
	if ok, err := r.buildMutant(ot.pkg, bin, ov); !ok {
		return stNotViable, err
	}
	timeout := max(r.floor, time.Duration(r.coef*ot.secs*float64(time.Second)))
	env := r.goEnv(ov, testenv.PatienceEnv+"="+r.patience.String())
	return mutantStatus(runTests(bin, ot.dir(r.root), nil, timeout, env, "-test.run", ot.run)), nil
}

// selfCheck is why a -testpkg run refuses to start: a missing -run (every
// test of a package as large as isolate, per mutant, is what gen avoids).
func (o options) selfCheck() error {
	switch {
	case o.testPkg == "" && o.run != "":
		return fmt.Errorf("-run needs -testpkg")
	case o.testPkg != "" && o.run == "":
		return fmt.Errorf("-testpkg needs -run")
	}
	return nil
}
