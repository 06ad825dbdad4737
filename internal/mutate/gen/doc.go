// Command gen runs gremlins' generated mutants of one package, each against
// only the tests that execute the mutated line: gremlins (.ci/gremlins) runs
// a package's whole suite per mutant, 40-500 s for kernel, pool, pool/api,
// isolate and pool/daemon on a 2-core host, days per package.
//
//	go run ./internal/mutate/gen -pkg kernel -out DIR
//
// The steps, per package:
//
//   - the mutants: gremlins itself lists them (`unleash --dry-run`, JSON
//     report). Its coverage run is told to run no test (-run=^$ through
//     GOFLAGS): the list is what is wanted, and coverage comes next;
//   - the coverage map, built once: the test binary is compiled with
//     -cover -coverpkg=PKG, each top-level test (-test.list) runs alone with
//     its own profile, and each covered block records the tests that ran it.
//     GOCOVERDIR is set too, so a test's re-executed helper processes count.
//     The map is cached in DIR and rebuilt for the tests whose file changed
//     (all of it when a non-test file changed);
//   - per mutant: the mutated file goes to a temporary directory, one
//     `go test -c -overlay` builds the binary, and it runs only the tests
//     that cover the mutant's line, the quickest four one process each,
//     then the rest in one, until one fails. A mutant on a position no
//     block holds (the case expressions of a tagless switch) runs every
//     test that entered its function; one outside any function, every
//     test. Killed when a test fails, TIMED OUT when a run passes its
//     timeout (a multiple of its tests' own time in the coverage run, with
//     a floor), lived when all pass, NOT COVERED when no test reaches the
//     line, NOT VIABLE when the mutant does not compile. Two mutators that
//     make the same change (- as INVERT_NEGATIVES and ARITHMETIC_BASE) are
//     tested once.
//
// The build cache: every go command gen runs (go list, gremlins' dry run,
// the coverage and mutant builds, and the tests' own builds) has GOCACHE
// set to gen's own, DIR/gocache (-gocache; locked: one gen at a time), so
// the user's is never written. Each mutant build adds the objects of its
// package and the packages above it in the test binary (4 MiB for
// isolate, 11 MiB for pool), which nothing reuses: past -cache-limit
// (default 8G; 0: no limit), between mutants, gen removes the entries
// added since the unmutated builds (std, dependencies and the unmutated
// package stay: the next build recompiles only what the mutant changes,
// where an emptied cache costs 50 s of std and dependencies), and empties
// the cache when that is not enough; at exit it removes the mutants'
// entries too. A build that fails because of the host (no space left on
// device, out of memory, the toolchain killed: no compile error at a
// position) is no verdict: it is tried once more on an emptied cache,
// and a second failure stops gen with the reason, the mutant left for the
// next run. Only a mutant's own compile error is NOT VIABLE.
//
// DIR/<pkg>.select.txt is the report, one line per mutant (status, mutator,
// file:line:col, tests run, seconds, the line's code), appended as each
// finishes: a re-run skips the mutants already in it whose line is
// unchanged, so a package can take several sessions. -retest LIVED tests
// the survivors again (after a test was added to kill them). The summary
// line has .ci/gremlins' columns; a lived mutant recorded in
// internal/mutate/equivalent.txt counts as equivalent.
//
// What the map cannot see: code that runs in a binary a test builds itself
// without -cover (pool/daemon's and the integration tests' `go build` of
// kernpool). The overlay reaches those builds, but a line only they run
// reads as not covered, and a survivor whose killer would be such a test
// reads as lived: run the package's whole suite on it (go test -overlay)
// before recording it as equivalent.
//
// Code that only another package's tests reach: isolate/kinit runs in the
// kernel's init, a process isolate's tests start by re-executing their
// own binary, which never returns to write coverage (it execs the
// interpreter or the reaper) and lives in its own mount namespace; its
// own tests leave most of it not covered. -testpkg isolate -run RE builds
// each mutant into isolate's test binary (the same overlay) and runs the
// tests RE names, all of them, in one process: the user chooses them, no
// map does. They run once first on the unmutated code (none may fail,
// their time sets the timeout); the report is still -pkg's:
//
//	gen -pkg isolate/kinit -retest 'LIVED,NOT COVERED' -testpkg isolate -run '^Test(Init|Namespaces)'
//
// .ci/gremlins --select runs this instead of gremlins' own test loop.
package main
