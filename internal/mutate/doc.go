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
