// Package doccheck holds the checks that keep the repository's documents
// and the code that cites them in step. Its tests fail when code or a
// document cites a section or rule of docs/parity.md ("parity §1 rule 2")
// that the file does not have, or names a file, a Markdown section, a
// declaration beside its file ("`enterFor` in `registry.go`") or a
// package's identifier (pool.Observer) that the tree does not have. It has
// no code of its own: only the tests.
package doccheck
