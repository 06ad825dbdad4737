package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"
)

// Mutation is one entry of the list: in File, replace the one occurrence
// of Find by Repl; running Pkgs' tests matching Run must then fail.
type Mutation struct {
	Name string // short unique id, used by -only
	File string // path from the repository root
	Find string // exact snippet; must occur exactly once in File
	Repl string // what replaces it
	Pkgs []string
	Run  string // go test -run pattern
	Tags string // go build tags, e.g. "integration"
	// Timeout, when set, replaces -timeout for this mutation's run: for a
	// mutant that makes its test hang until go test's timeout.
	Timeout time.Duration
	Why     string // what behaviour the mutation breaks
	Line    int    // line of the entry in the list, for messages
}

// parseList reads the list: records of "key: value" lines separated by
// blank lines; lines starting with '#' are comments. Values are taken
// verbatim after "key: " (snippets keep their quotes and spaces).
func parseList(path string) ([]Mutation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mutation
	var cur *Mutation
	var keys map[string]bool
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, Mutation{Line: n})
			cur = &out[len(out)-1]
			keys = map[string]bool{}
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"key: value\", got %q", path, n, line)
		}
		// A key twice in one record is two records glued together (a
		// merge dropped the blank line between them): the first would
		// silently never run.
		if keys[key] {
			return nil, fmt.Errorf("%s:%d: %s: a second time in one record (a blank line missing before it?)", path, n, key)
		}
		keys[key] = true
		if err := cur.set(key, val); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, m := range out {
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, m.Line, err)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%s:%d: duplicate name %q", path, m.Line, m.Name)
		}
		seen[m.Name] = true
	}
	return out, nil
}

func (m *Mutation) set(key, val string) error {
	verbatim := map[string]*string{
		"name": &m.Name, "file": &m.File, "find": &m.Find, "repl": &m.Repl,
		"run": &m.Run, "tags": &m.Tags, "why": &m.Why,
	}
	if field, ok := verbatim[key]; ok {
		*field = val
		return nil
	}
	switch key {
	case "pkg":
		m.Pkgs = strings.Fields(val)
	case "timeout":
		d, err := time.ParseDuration(val)
		if err != nil {
			return fmt.Errorf("timeout: %w", err)
		}
		m.Timeout = d
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}

func (m *Mutation) check() error {
	switch {
	case m.Name == "", m.File == "", m.Find == "", len(m.Pkgs) == 0, m.Run == "", m.Why == "":
		return fmt.Errorf("mutation %q needs name, file, find, repl, pkg, run and why", m.Name)
	case m.Find == m.Repl:
		return fmt.Errorf("mutation %q: find and repl are the same", m.Name)
	}
	return nil
}
