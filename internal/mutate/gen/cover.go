package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// TestRun is one top-level test's run in the coverage pass.
type TestRun struct {
	Name   string
	File   string  // the _test.go file that declares it
	Secs   float64 // its wall time alone, with coverage
	Failed bool    // failed on the unmutated code: never selected
	Blocks []int   // indexes into CoverMap.Blocks it executed
}

// CoverMap says which tests execute which blocks of the package.
type CoverMap struct {
	// Source hashes the package's non-test files: when it changes every
	// test runs again; TestFiles hashes each test file, whose tests alone
	// run again when it changes (or appears).
	Source    string
	TestFiles map[string]string
	Blocks    []Block
	Tests     []TestRun

	byFile   map[string][]int // file -> indexes into Blocks
	blockIdx map[Block]int
}

// Block is a coverage block: File (from the repository root) from L1.C1
// to L2.C2.
type Block struct {
	File           string
	L1, C1, L2, C2 int
}

func (b Block) holds(line, col int) bool {
	return (line > b.L1 || line == b.L1 && col >= b.C1) && (line < b.L2 || line == b.L2 && col <= b.C2)
}

func (cm *CoverMap) index() {
	cm.byFile = map[string][]int{}
	cm.blockIdx = map[Block]int{}
	for i, b := range cm.Blocks {
		cm.byFile[b.File] = append(cm.byFile[b.File], i)
		cm.blockIdx[b] = i
	}
}

// addProfile reads a coverage profile (text format) and returns the
// indexes of the blocks it counts as executed. modPrefix is the module
// path plus "/": profile paths are import paths.
func (cm *CoverMap) addProfile(r io.Reader, modPrefix string, into map[int]bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "mode:") {
			continue
		}
		b, count, err := parseProfileLine(line, modPrefix)
		if err != nil {
			return err
		}
		if count == 0 {
			continue
		}
		i, ok := cm.blockIdx[b]
		if !ok {
			i = len(cm.Blocks)
			cm.Blocks = append(cm.Blocks, b)
			cm.blockIdx[b] = i
			cm.byFile[b.File] = append(cm.byFile[b.File], i)
		}
		into[i] = true
	}
	return sc.Err()
}

// parseProfileLine parses "importpath/f.go:L1.C1,L2.C2 stmts count".
func parseProfileLine(line, modPrefix string) (Block, int, error) {
	bad := fmt.Errorf("coverage profile: bad line %q", line)
	colon := strings.LastIndex(line, ":")
	if colon < 0 {
		return Block{}, 0, bad
	}
	f := strings.TrimPrefix(line[:colon], modPrefix)
	var l1, c1, l2, c2, stmts, count int
	if _, err := fmt.Sscanf(line[colon+1:], "%d.%d,%d.%d %d %d", &l1, &c1, &l2, &c2, &stmts, &count); err != nil {
		return Block{}, 0, bad
	}
	return Block{File: f, L1: l1, C1: c1, L2: l2, C2: c2}, count, nil
}

// selectTests returns the indexes of the passing tests that can observe a
// mutant at file:line:col, and whether any can. Every test that runs a
// block on the mutant's line is taken (the line, not the position: a wider
// net costs time, never soundness). A position in no block is code whose
// execution no counter records (a tagless switch's case expressions are
// evaluated by tests that took another case): every test that entered the
// enclosing function is taken, and every test outside any function
// (package-level initialisers run for every test).
func (cm *CoverMap) selectTests(m Mutant, fn func(Mutant) (l1, l2 int, ok bool)) []int {
	sel := map[int]bool{}
	inBlock := false
	for _, bi := range cm.byFile[m.File] {
		b := cm.Blocks[bi]
		if b.L1 <= m.Line && m.Line <= b.L2 {
			cm.addTestsOf(bi, sel)
		}
		inBlock = inBlock || b.holds(m.Line, m.Col)
	}
	if !inBlock {
		if l1, l2, ok := fn(m); ok {
			for _, bi := range cm.byFile[m.File] {
				if b := cm.Blocks[bi]; b.L1 <= l2 && b.L2 >= l1 {
					cm.addTestsOf(bi, sel)
				}
			}
		} else {
			for i := range cm.Tests {
				sel[i] = true
			}
		}
	}
	var out []int
	for i := range sel {
		if !cm.Tests[i].Failed {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

func (cm *CoverMap) addTestsOf(block int, sel map[int]bool) {
	// Tests are few (tens) and blocks thousands: a scan per lookup is
	// cheaper to keep right than a second index.
	for ti, t := range cm.Tests {
		if sel[ti] {
			continue
		}
		i := sort.SearchInts(t.Blocks, block)
		if i < len(t.Blocks) && t.Blocks[i] == block {
			sel[ti] = true
		}
	}
}

// funcRanges finds, per file, the line range of the innermost function
// (declaration or literal) holding a position; files are parsed once.
type funcRanges struct {
	root  string
	files map[string]*ast.File
	fset  *token.FileSet
}

func (fr *funcRanges) find(m Mutant) (int, int, bool) {
	if fr.files == nil {
		fr.files = map[string]*ast.File{}
		fr.fset = token.NewFileSet()
	}
	f, ok := fr.files[m.File]
	if !ok {
		f, _ = parser.ParseFile(fr.fset, filepath.Join(fr.root, m.File), nil, parser.SkipObjectResolution)
		fr.files[m.File] = f
	}
	if f == nil {
		return 0, 0, false
	}
	best1, best2, found := 0, 0, false
	ast.Inspect(f, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			p1, p2 := fr.fset.Position(n.Pos()), fr.fset.Position(n.End())
			if p1.Line <= m.Line && m.Line <= p2.Line && (!found || p2.Line-p1.Line <= best2-best1) {
				best1, best2, found = p1.Line, p2.Line, true
			}
		}
		return true
	})
	return best1, best2, found
}

// hashFiles hashes each named file of dir.
func hashFiles(dir string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		s := sha256.Sum256(b)
		out[n] = hex.EncodeToString(s[:])
	}
	return out, nil
}

// combined is one hash of a set of file hashes.
func combined(h map[string]string) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := sha256.New()
	for _, k := range keys {
		io.WriteString(s, k+" "+h[k]+"\n")
	}
	return hex.EncodeToString(s.Sum(nil))
}

// testDecls maps each top-level test, fuzz target and example of the
// package's test files to the file that declares it.
func testDecls(dir string, testFiles []string) (map[string]string, error) {
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, n := range testFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				out[fd.Name.Name] = n
			}
		}
	}
	return out, nil
}

func loadCoverMap(path string) (*CoverMap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cm CoverMap
	if err := json.Unmarshal(b, &cm); err != nil {
		return nil, err
	}
	cm.index()
	return &cm, nil
}

func (cm *CoverMap) save(path string) error {
	b, err := json.Marshal(cm)
	if err != nil {
		return err
	}
	tmp := path + ".tmp." + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
