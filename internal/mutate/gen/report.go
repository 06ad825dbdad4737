package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Statuses, as gremlins names them.
const (
	stKilled     = "KILLED"
	stLived      = "LIVED"
	stNotCovered = "NOT COVERED"
	stTimedOut   = "TIMED OUT"
	stNotViable  = "NOT VIABLE"
)

// Entry is one line of the report: a tested mutant.
type Entry struct {
	Status string
	Mutant
	Tests int     // how many tests ran
	Secs  float64 // build and run
	Code  string  // the mutated line, trimmed: an entry whose line changed is stale
}

func (e Entry) key() string { return e.Mutator + " " + e.Pos() }

func (e Entry) String() string {
	return fmt.Sprintf("%-11s\t%-22s\t%s\t%d\t%.1f\t%s", e.Status, e.Mutator, e.Pos(), e.Tests, e.Secs, e.Code)
}

// parseEntry reads a line written by Entry.String.
func parseEntry(line string) (Entry, error) {
	f := strings.Split(line, "\t")
	if len(f) != 6 {
		return Entry{}, fmt.Errorf("report: %d fields in %q, want 6", len(f), line)
	}
	e := Entry{Status: strings.TrimSpace(f[0]), Code: f[5]}
	e.Mutator = strings.TrimSpace(f[1])
	pos := strings.Split(f[2], ":")
	var err1, err2, err3, err4 error
	if len(pos) == 3 {
		e.File = pos[0]
		e.Line, err1 = strconv.Atoi(pos[1])
		e.Col, err2 = strconv.Atoi(pos[2])
	} else {
		err1 = fmt.Errorf("bad position %q", f[2])
	}
	e.Tests, err3 = strconv.Atoi(f[3])
	e.Secs, err4 = strconv.ParseFloat(f[4], 64)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return Entry{}, fmt.Errorf("report: %q: %w", line, err)
		}
	}
	return e, nil
}

func readReport(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseReport(f)
}

func parseReport(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		e, err := parseEntry(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// sourceLines caches the files' lines, for the code of a mutant's line.
type sourceLines struct {
	root  string
	files map[string][]string
}

// line returns line n of file, trimmed ("" past its end).
func (s *sourceLines) line(file string, n int) string {
	if s.files == nil {
		s.files = map[string][]string{}
	}
	ls, ok := s.files[file]
	if !ok {
		b, _ := os.ReadFile(filepath.Join(s.root, file))
		ls = strings.Split(string(b), "\n")
		s.files[file] = ls
	}
	if n < 1 || n > len(ls) {
		return ""
	}
	return strings.TrimSpace(ls[n-1])
}

// Equivalent is a record of internal/mutate/equivalent.txt (its format is
// described at its top).
type Equivalent struct {
	File, Mutator, Code, Prev string
}

func parseEquivalents(r io.Reader) ([]Equivalent, error) {
	var out []Equivalent
	var cur Equivalent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		k, v, ok := strings.Cut(line, ": ")
		if strings.HasPrefix(line, "#") || !ok {
			continue
		}
		switch k {
		case "at":
			f, _, _ := strings.Cut(v, ":")
			cur = Equivalent{File: f}
		case "mutator":
			cur.Mutator = strings.TrimSpace(v)
		case "code":
			cur.Code = strings.TrimSpace(v)
		case "prev":
			cur.Prev = strings.TrimSpace(v)
		case "why":
			if cur.File == "" || cur.Mutator == "" || cur.Code == "" {
				return nil, fmt.Errorf("equivalent.txt: record before %q lacks at, mutator or code", line)
			}
			out = append(out, cur)
		}
	}
	return out, sc.Err()
}

// recorded says whether a lived mutant is recorded as equivalent: same
// file, mutator and code, and the line before it when the record names it.
func recorded(eqs []Equivalent, e Entry, src *sourceLines) bool {
	for _, q := range eqs {
		if q.File == e.File && q.Mutator == e.Mutator && q.Code == src.line(e.File, e.Line) &&
			(q.Prev == "" || q.Prev == src.line(e.File, e.Line-1)) {
			return true
		}
	}
	return false
}

// Tally is a package's line of the summary.
type Tally struct {
	Killed, Lived, Equivalent, NotCovered, TimedOut, NotViable int
	Survivors                                                  []Entry // lived, not recorded
}

func tally(es []Entry, eqs []Equivalent, src *sourceLines) Tally {
	var t Tally
	for _, e := range es {
		switch e.Status {
		case stKilled:
			t.Killed++
		case stLived:
			if recorded(eqs, e, src) {
				t.Equivalent++
			} else {
				t.Lived++
				t.Survivors = append(t.Survivors, e)
			}
		case stNotCovered:
			t.NotCovered++
		case stTimedOut:
			t.TimedOut++
		case stNotViable:
			t.NotViable++
		}
	}
	return t
}

// summaryLine has .ci/gremlins' summary columns.
func (t Tally) summaryLine(pkg, secs string) string {
	return fmt.Sprintf("%-14s %6d %5d %10d %11d %9d %10d %6s", pkg, t.Killed, t.Lived, t.Equivalent,
		t.NotCovered, t.TimedOut, t.NotViable, secs)
}
