// Package overlay is what both mutation runners (internal/mutate and
// internal/mutate/gen) need to build a mutant: the repository's root and
// a `go build -overlay` file that swaps one source file for its mutant.
package overlay
