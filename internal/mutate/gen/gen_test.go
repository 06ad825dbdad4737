package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestApply: each default mutator turns the token at the position into
// gremlins' replacement, and nothing else of the file changes.
func TestApply(t *testing.T) {
	src := "package p\n\nfunc f(a, b int) int {\n\tif a >= b && a != 0 {\n\t\ta++\n\t}\n\treturn a - -b\n}\n"
	cases := []struct {
		mutator   string
		line, col int
		want      string // the mutated line
	}{
		{"CONDITIONALS_BOUNDARY", 4, 7, "\tif a > b && a != 0 {"},
		{"CONDITIONALS_NEGATION", 4, 7, "\tif a < b && a != 0 {"},
		{"CONDITIONALS_NEGATION", 4, 17, "\tif a >= b && a == 0 {"},
		{"INVERT_LOGICAL", 4, 12, "\tif a >= b || a != 0 {"},
		{"INCREMENT_DECREMENT", 5, 4, "\t\ta--"},
		{"ARITHMETIC_BASE", 7, 11, "\treturn a + -b"},
		{"INVERT_NEGATIVES", 7, 13, "\treturn a - +b"},
	}
	for _, c := range cases {
		m := Mutant{Mutator: c.mutator, File: "p.go", Line: c.line, Col: c.col}
		out, _, _, err := apply([]byte(src), m)
		if err != nil {
			t.Errorf("%s: %v", m.Pos(), err)
			continue
		}
		got := strings.Split(string(out), "\n")
		want := strings.Split(src, "\n")
		want[c.line-1] = c.want
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s %s: got line %q, want %q", c.mutator, m.Pos(), got[c.line-1], c.want)
		}
	}
}

// TestApplyRefusesAStaleList: a position where no token starts, or whose
// token the mutator does not change, is an error (the list no longer
// matches the file), never some other mutant.
func TestApplyRefusesAStaleList(t *testing.T) {
	src := []byte("package p\n\nvar x = 1 + 2\n")
	for _, m := range []Mutant{
		{Mutator: "ARITHMETIC_BASE", File: "p.go", Line: 3, Col: 12},       // on "+"'s right
		{Mutator: "CONDITIONALS_BOUNDARY", File: "p.go", Line: 3, Col: 11}, // "+" is no comparison
		{Mutator: "ARITHMETIC_BASE", File: "p.go", Line: 9, Col: 1},        // past the end
	} {
		if _, _, _, err := apply(src, m); err == nil {
			t.Errorf("%s %s: applied, want an error", m.Mutator, m.Pos())
		}
	}
	if _, _, repl, err := apply(src, Mutant{Mutator: "ARITHMETIC_BASE", File: "p.go", Line: 3, Col: 11}); err != nil || repl != "-" {
		t.Errorf("+ at 3:11: got %q, %v; want -", repl, err)
	}
}

// testMap is a coverage map of one file, p/f.go: TestA runs the block of
// lines 3-5, TestB the block of lines 7-9 (a case body starting at the
// case's colon on line 7), TestC only line 12's block, in another
// function (lines 11-13).
func testMap(t *testing.T) *CoverMap {
	t.Helper()
	cm := &CoverMap{Tests: []TestRun{{Name: "TestA"}, {Name: "TestB"}, {Name: "TestC"}, {Name: "TestBroken", Failed: true}}}
	cm.index()
	profiles := []string{
		"mode: set\nm/p/f.go:3.2,5.10 2 1\nm/p/f.go:7.12,9.3 1 0\nm/p/f.go:12.2,12.20 1 0\n",
		"mode: set\nm/p/f.go:3.2,5.10 2 0\nm/p/f.go:7.12,9.3 1 1\n",
		"mode: set\nm/p/f.go:12.2,12.20 1 1\n",
		"mode: set\nm/p/f.go:3.2,5.10 2 1\nm/p/f.go:7.12,9.3 1 1\nm/p/f.go:12.2,12.20 1 1\n",
	}
	for i, p := range profiles {
		blocks := map[int]bool{}
		if err := cm.addProfile(strings.NewReader(p), "m/", blocks); err != nil {
			t.Fatal(err)
		}
		for b := range blocks {
			cm.Tests[i].Blocks = append(cm.Tests[i].Blocks, b)
		}
		slices.Sort(cm.Tests[i].Blocks)
	}
	return cm
}

func names(cm *CoverMap, sel []int) string {
	var n []string
	for _, i := range sel {
		n = append(n, cm.Tests[i].Name)
	}
	return strings.Join(n, " ")
}

// TestSelectTests: a mutant gets the tests that ran a block on its line;
// one at a position no block holds gets every test that entered its
// function; one outside any function gets every test; a test that failed
// on the unmutated code is never selected, and a line nobody ran gets
// none.
func TestSelectTests(t *testing.T) {
	cm := testMap(t)
	fn := func(m Mutant) (int, int, bool) {
		switch {
		case m.Line >= 2 && m.Line <= 10:
			return 2, 10, true
		case m.Line >= 11 && m.Line <= 13:
			return 11, 13, true
		}
		return 0, 0, false
	}
	cases := []struct {
		line, col int
		want      string
	}{
		{4, 5, "TestA"},              // inside the first block
		{7, 14, "TestB"},             // inside the case body, after the colon
		{7, 7, "TestA TestB"},        // the case expression: no block, the function's tests
		{12, 5, "TestC"},             // the other function
		{20, 1, "TestA TestB TestC"}, // outside any function
	}
	for _, c := range cases {
		m := Mutant{File: "p/f.go", Line: c.line, Col: c.col}
		if got := names(cm, cm.selectTests(m, fn)); got != c.want {
			t.Errorf("%d:%d: selected %q, want %q", c.line, c.col, got, c.want)
		}
	}
	if got := cm.selectTests(Mutant{File: "p/other.go", Line: 4, Col: 5}, func(Mutant) (int, int, bool) { return 1, 9, true }); len(got) != 0 {
		t.Errorf("a file no test ran: selected %q, want none", names(cm, got))
	}
}

// TestFuncRanges: the innermost function holding a line, a literal inside
// a declaration included; none outside every function.
func TestFuncRanges(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nvar v = 1 - 2\n\nfunc f() {\n\tg := func() {\n\t\t_ = 3 - 1\n\t}\n\tg()\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "f.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	fr := funcRanges{root: dir}
	for _, c := range []struct{ line, l1, l2 int }{{7, 6, 8}, {9, 5, 10}, {3, 0, 0}} {
		l1, l2, ok := fr.find(Mutant{File: "f.go", Line: c.line})
		if ok != (c.l1 != 0) || l1 != c.l1 || l2 != c.l2 {
			t.Errorf("line %d: got %d-%d (%v), want %d-%d", c.line, l1, l2, ok, c.l1, c.l2)
		}
	}
}

// TestReportRoundTrip: an entry reads back as written, code with tabs
// of its own excepted (the code is trimmed and gofmt indents with tabs).
func TestReportRoundTrip(t *testing.T) {
	es := []Entry{
		{Status: stKilled, Mutant: Mutant{Mutator: "CONDITIONALS_BOUNDARY", File: "kernel/a.go", Line: 12, Col: 5}, Tests: 3, Secs: 4.5, Code: "if n > max {"},
		{Status: stNotCovered, Mutant: Mutant{Mutator: "ARITHMETIC_BASE", File: "kernel/b.go", Line: 1, Col: 20}, Code: "x := a + b"},
	}
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.String() + "\n")
	}
	got, err := parseReport(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, es) {
		t.Errorf("read back %+v, want %+v", got, es)
	}
}

// TestRecorded: a lived mutant counts as equivalent when a record names
// its file, mutator and code, and its previous line when the record has
// one; another mutator or other code is a survivor.
func TestRecorded(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package p\n\nfunc f(n int) {\n\tn++\n\tif n > 2 {\n\t}\n\tn--\n\tif n > 2 {\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "p/f.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	eqs, err := parseEquivalents(strings.NewReader("# comment\n\nat: p/f.go:5\nmutator: CONDITIONALS_BOUNDARY\ncode: if n > 2 {\nprev: n++\nwhy: because\n"))
	if err != nil || len(eqs) != 1 {
		t.Fatalf("parsed %v, %v; want one record", eqs, err)
	}
	lines := &sourceLines{root: dir}
	for _, c := range []struct {
		mutator string
		line    int
		want    bool
	}{{"CONDITIONALS_BOUNDARY", 5, true}, {"CONDITIONALS_BOUNDARY", 8, false}, {"CONDITIONALS_NEGATION", 5, false}} {
		e := Entry{Status: stLived, Mutant: Mutant{Mutator: c.mutator, File: "p/f.go", Line: c.line, Col: 7}}
		if got := recorded(eqs, e, lines); got != c.want {
			t.Errorf("%s at line %d: recorded %v, want %v", c.mutator, c.line, got, c.want)
		}
	}
	tl := tally([]Entry{{Status: stLived, Mutant: Mutant{Mutator: "CONDITIONALS_BOUNDARY", File: "p/f.go", Line: 5}},
		{Status: stLived, Mutant: Mutant{Mutator: "CONDITIONALS_BOUNDARY", File: "p/f.go", Line: 8}},
		{Status: stKilled}, {Status: stTimedOut}}, eqs, lines)
	if tl.Killed != 1 || tl.Lived != 1 || tl.Equivalent != 1 || tl.TimedOut != 1 || len(tl.Survivors) != 1 {
		t.Errorf("tally %+v, want 1 killed, 1 lived, 1 equivalent, 1 timed out", tl)
	}
}

// TestEquivalentsParse: the repository's own record file parses, every
// record complete.
func TestEquivalentsParse(t *testing.T) {
	f, err := os.Open("../equivalent.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eqs, err := parseEquivalents(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(eqs) < 50 {
		t.Errorf("%d records, want the file's (more than 50)", len(eqs))
	}
}

// TestBatches: the first n tests run alone, the rest in one batch.
func TestBatches(t *testing.T) {
	for _, c := range []struct {
		sel  []int
		n    int
		want string
	}{
		{[]int{5, 3, 9, 1, 7, 2}, 4, "[[5] [3] [9] [1] [7 2]]"},
		{[]int{5, 3}, 4, "[[5] [3]]"},
		{[]int{5, 3, 9, 1}, 4, "[[5] [3] [9] [1]]"},
		{nil, 4, "[]"},
	} {
		if got := fmt.Sprint(batches(c.sel, c.n)); got != c.want {
			t.Errorf("batches(%v, %d) = %s, want %s", c.sel, c.n, got, c.want)
		}
	}
}

// TestOtherPackagesTests (-testpkg): a mutant of package p builds into
// package q's test binary, and runs only the tests -run names there: q's
// TestMax kills the mutant of Max, while Neg's mutant lives because the
// test that would kill it (TestNeg) is not named. A -run that fails on the
// unmutated code refuses to start.
func TestOtherPackagesTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module m\n\ngo 1.22\n",
		"p/p.go": "package p\n\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n\nfunc Neg(a int) int { return -a }\n",
		"q/q_test.go": "package q\n\nimport (\n\t\"testing\"\n\n\t\"m/p\"\n)\n\n" +
			"func TestMax(t *testing.T) {\n\tif p.Max(2, 1) != 2 || p.Max(1, 2) != 2 {\n\t\tt.Fatal(\"max\")\n\t}\n}\n\n" +
			"func TestNeg(t *testing.T) {\n\tif p.Neg(2) != -2 {\n\t\tt.Fatal(\"neg\")\n\t}\n}\n\n" +
			"func TestBroken(t *testing.T) { t.Fatal(\"broken\") }\n",
	}
	writeFiles(t, root, files)
	newRunner := func(run string) *runner {
		r := &runner{root: root, pkg: "p", coef: 10, floor: time.Minute, work: t.TempDir(),
			src: sourceLines{root: root}, done: map[string]Entry{}, other: &otherTests{pkg: "q", run: run}}
		var err error
		if r.info, err = listPkg(root, "p", nil); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := newRunner("^Test(Max|Broken)$").baseline(); err == nil {
		t.Error("baseline with a failing test: no error, want one")
	}
	r := newRunner("^TestMax$")
	if err := r.baseline(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m    Mutant
		want string
	}{
		{Mutant{Mutator: "CONDITIONALS_NEGATION", File: "p/p.go", Line: 4, Col: 7}, stKilled},
		{Mutant{Mutator: "INVERT_NEGATIVES", File: "p/p.go", Line: 10, Col: 30}, stLived},
		{Mutant{Mutator: "ARITHMETIC_BASE", File: "p/p_other.go", Line: 1, Col: 1}, stNotCovered},
	} {
		if e, err := r.test(c.m); err != nil {
			t.Errorf("%s %s: %v", c.m.Mutator, c.m.Pos(), err)
		} else if e.Status != c.want || e.Status != stNotCovered && e.Tests != 1 {
			t.Errorf("%s %s: %s after %d tests, want %s after 1", c.m.Mutator, c.m.Pos(), e.Status, e.Tests, c.want)
		}
	}
}

// writeFiles writes files (path from root: content) under root, and sets
// ctx for the code under test.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
}
