// Command mutate is the project's mutation check: it applies each one-line
// mutation listed in mutations.txt to the tree, one at a time, runs the
// tests named to catch it, and prints per mutation whether they did, then
// "N caught, M missed". It exits non-zero on any miss, on a mutation whose
// snippet is not found exactly once in its file (the code drifted: update
// the list), and on one that does not compile.
//
// The working tree is never written: each mutated file is written to a
// temporary directory and handed to `go test -overlay`, so a killed run
// leaves nothing behind. Before mutating, the named tests run once on the
// unmutated tree (a test that already fails would "catch" everything).
//
// A build per mutant spends most of its time compiling and linking, so
// the mutants of package Go code run as mutant schemata (schema.go): each
// named test package is built once with every mutant in it, each mutated
// function a copy that the mutant's id, in a file beside the running test
// binary, selects; the function itself keeps its name and lines. Each
// schemata binary first runs its named tests with no mutant selected, and
// a mutant its tests miss there is tried again in a build of its own, so
// the rewrite decides no miss. Test files, Python files, isolate/kinit
// and tagged (integration) mutants always get a build of their own, as
// does everything with -schemata=false.
//
//	go run ./internal/mutate                 # every mutation
//	go run ./internal/mutate -sample 12      # a fixed, evenly spread sample
//	go run ./internal/mutate -only 'rpcsock' # mutations whose name matches
//	go run ./internal/mutate -j 2            # two mutants tested at once
//
// The list's format is described at the top of mutations.txt.
//
// The list holds the mutations someone thought of. .ci/gremlins runs
// gremlins, which generates its mutants (every covered comparison,
// arithmetic operator, increment, negation) over whole packages and
// reports per package what the tests killed; a survivor gets a test that
// kills it (and, when it protects something that matters, a record here),
// or a record in equivalent.txt saying why no test can tell it apart.
// Its --select mode (internal/mutate/gen) runs each of gremlins' mutants
// against only the tests that execute its line.
package main
