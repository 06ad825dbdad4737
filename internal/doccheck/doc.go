// Package doccheck holds the checks that keep the repository's documents
// and the code that cites them in step. Its test fails when code or a
// document cites a section or rule of docs/parity.md ("parity §1 rule 2")
// that the file does not have. It has no code of its own: only the test.
package doccheck
