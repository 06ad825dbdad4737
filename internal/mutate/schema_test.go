package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lib is the package the schemata tests mutate: one function of each
// shape the switch must forward (methods with named and unnamed
// receivers, blank and unnamed parameters, variadic, generic, named
// results, no results).
const lib = `package lib

import "strings"

type T struct{ n int }

// Add adds.
func (t *T) Add(d int) int { return t.n + d }

func (T) Name(string, int) string { return "t" }

func Twice(_ int, n int) int { return 2 * n }

func Join(sep string, parts ...string) string { return strings.Join(parts, sep) }

func Max[V int | float64](a, b V) V {
	if a > b {
		return a
	}
	return b
}

func Split(s string) (head, rest string) {
	head, rest, _ = strings.Cut(s, ",")
	return
}

var Log []string

func Note(s string) { Log = append(Log, s) }

var Ten = ten()

func ten() int { return 10 }

func init() { Note("init") }

//go:noinline
func Pinned() int { return 1 }
`

// mainSrc prints one line per function of lib, for the mutant selected.
const mainSrc = `package main

import (
	"fmt"

	"example.com/s/lib"
)

func main() {
	t := &lib.T{}
	h, r := lib.Split("a,b")
	lib.Note("x")
	fmt.Println(t.Add(2), lib.T{}.Name("", 0), lib.Join("-", "a", "b"), lib.Max(3, 4), h, r, lib.Log, lib.Ten, lib.Twice(0, 5))
}
`

func TestSchematizeSelectsEachMutant(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	muts := []schemaMutant{
		{id: 1, find: "return t.n + d", repl: "return t.n - d"},
		{id: 2, find: `return "t"`, repl: `return "u"`},
		{id: 3, find: "strings.Join(parts, sep)", repl: "strings.Join(parts, sep+sep)"},
		{id: 4, find: "if a > b {", repl: "if a < b {"},
		{id: 5, find: `head, rest, _ = strings.Cut(s, ",")`, repl: `rest, head, _ = strings.Cut(s, ",")`},
		{id: 6, find: "Log = append(Log, s)", repl: "Log = append(Log, s+s)"},
		{id: 7, find: "func ten() int { return 10 }", repl: "func ten() int { return 11 }"},
		{id: 8, find: "func (t *T) Add(d int) int { return t.n + d }", repl: "func (t *T) Add(d int) int { return t.n * d }"},
		{id: 9, find: "return 2 * n", repl: "return 3 * n"},
		// Not placeable: outside a function, in init, under a directive,
		// and a changed signature.
		{id: 20, find: "type T struct{ n int }", repl: "type T struct{ n int8 }"},
		{id: 21, find: `Note("init")`, repl: `Note("tini")`},
		{id: 22, find: "return 1 }", repl: "return 2 }"},
		{id: 23, find: "func Join(sep string,", repl: "func Join(sep any,"},
	}
	out, done, skipped := schematize("/x/lib.go", []byte(lib), muts)
	if got := strconvInts(done); got != "1,2,3,4,5,6,7,8,9" {
		t.Errorf("placed %s, want 1 to 9", got)
	}
	wantSkip := map[int]string{
		20: "not inside a function body", 21: "init function",
		22: "compiler directive", 23: "signature",
	}
	if len(skipped) != len(wantSkip) {
		t.Errorf("skipped %v, want ids 20-23", skipped)
	}
	for id, want := range wantSkip {
		if !strings.Contains(skipped[id], want) {
			t.Errorf("mutant %d: skipped for %q, want it to say %q", id, skipped[id], want)
		}
	}
	dir := t.TempDir()
	write := func(rel, s string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("go.mod", "module example.com/s\n\ngo 1.22\n")
	orig := write("lib/lib.go", lib)
	write("main.go", mainSrc)
	schem := write("ov/lib.go", string(out))
	sel := write("ov/sel.go", string(selectorFile("lib")))
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {orig: schem, filepath.Join(dir, "lib", schemaSelector): sel}})
	write("ov.json", string(ov))
	exe := filepath.Join(dir, "prog")
	build := exec.Command("go", "build", "-overlay="+filepath.Join(dir, "ov.json"), "-o", exe, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build of the schematized package: %v\n%s\n%s", err, b, out)
	}
	// The expected lines, written out by hand for each mutant.
	want := map[int]string{
		0:  "2 t a-b 4 a b [init x] 10 10",
		1:  "-2 t a-b 4 a b [init x] 10 10",
		2:  "2 u a-b 4 a b [init x] 10 10",
		3:  "2 t a--b 4 a b [init x] 10 10",
		4:  "2 t a-b 3 a b [init x] 10 10",
		5:  "2 t a-b 4 b a [init x] 10 10",
		6:  "2 t a-b 4 a b [initinit xx] 10 10",
		7:  "2 t a-b 4 a b [init x] 11 10",
		8:  "0 t a-b 4 a b [init x] 10 10",
		9:  "2 t a-b 4 a b [init x] 10 15",
		10: "2 t a-b 4 a b [init x] 10 10", // an id with no copy runs the original
	}
	for id := 0; id <= 10; id++ {
		if id != 0 {
			if err := os.WriteFile(exe+schemaSuffix, []byte(strconv.Itoa(id)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := exec.Command(exe).CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != want[id] {
			t.Errorf("mutant %d: %q, %v; want %q", id, got, err, want[id])
		}
	}
}

func strconvInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func TestSchemaEligible(t *testing.T) {
	for _, c := range []struct {
		m    Mutation
		want string // "" or a part of the reason
	}{
		{Mutation{File: "pool/registry.go"}, ""},
		{Mutation{File: "kernel/runner.py"}, "not a package's Go source"},
		{Mutation{File: "integration/harness_test.go"}, "not a package's Go source"},
		{Mutation{File: "pool/daemon/daemon.go", Tags: "integration"}, "build tags"},
		{Mutation{File: "isolate/kinit/proc_linux.go"}, "init step"},
	} {
		got := schemaEligible(c.m)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("schemaEligible(%s, tags %q) = %q, want %q", c.m.File, c.m.Tags, got, c.want)
		}
	}
}

// TestSchemataRunner runs the runner over a module of its own: a mutant
// its test catches, one no test checks, one a test checks only by
// comparing against a child process of the same executable started with
// an empty environment (the child must run the same mutant, or a mutant
// no test can tell apart would look caught), and a package whose named
// test fails unmutated (its mutants must leave the schemata build).
func TestSchemataRunner(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	dir := t.TempDir()
	for rel, s := range map[string]string{
		"go.mod": "module example.com/r\n\ngo 1.22\n",
		"p/p.go": "package p\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Label() string { return \"x\" }\n",
		"p/p_test.go": `package p

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Stdout.WriteString(strconv.Itoa(Add(2, 3)))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("Add(1, 2) != 3")
	}
}

func TestSelf(t *testing.T) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "child")
	cmd.Env = []string{}
	out, err := cmd.Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != strconv.Itoa(Add(2, 3)) {
		t.Fatalf("the child's Add(2, 3) = %q (%v), this process's %d", got, err, Add(2, 3))
	}
}
`,
		"q/q.go":      "package q\n\nfunc One() int { return 1 }\n",
		"q/q_test.go": "package q\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) { t.Fatal(\"fails unmutated\") }\n",
	} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOWORK", "off")
	ms := []Mutation{
		{Name: "add-minus", File: "p/p.go", Find: "return a + b", Repl: "return a - b", Pkgs: []string{"./p/"}, Run: "^TestAdd$"},
		{Name: "label-unchecked", File: "p/p.go", Find: `return "x"`, Repl: `return "y"`, Pkgs: []string{"./p/"}, Run: "^TestAdd$"},
		{Name: "child-agrees", File: "p/p.go", Find: "func Add(a, b int) int { return a + b }", Repl: "func Add(a, b int) int { return a * b }", Pkgs: []string{"./p/"}, Run: "^TestSelf$"},
		{Name: "broken-baseline", File: "q/q.go", Find: "return 1", Repl: "return 2", Pkgs: []string{"./q/"}, Run: "^TestOne$"},
	}
	r := &runner{root: dir, timeout: 2 * time.Minute}
	s, err := r.prepareSchemata(ms, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	r.schema = s
	if s.bins["./q/"] == nil || s.bins["./q/"].err == nil {
		t.Errorf("q's test binary: %+v, want its unmutated failure recorded", s.bins["./q/"])
	}
	for i, want := range []struct {
		verdict         string
		placed, decided bool // runs in the schemata build; is decided there
	}{
		{verdictCaught, true, true},
		{verdictMissed, true, false}, // a miss is checked with a build of its own
		{verdictMissed, true, false},
		{verdictCaught, false, false},
	} {
		if got := r.schema.use(i, ms[i]) != nil; got != want.placed {
			t.Errorf("%s: in the schemata build %v, want %v", ms[i].Name, got, want.placed)
		}
		if res := r.mutateOne(ms, i); res.verdict != want.verdict || res.schema != want.decided {
			t.Errorf("%s: %s (%s), decided in the schemata build %v; want %s, %v", ms[i].Name, res.verdict, res.detail, res.schema, want.verdict, want.decided)
		}
	}
}
