package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// cacheModule is a module whose package p has mutants q's TestMax kills
// (Max's comparison) and one that does not compile (Greet's string +).
var cacheModule = map[string]string{
	"go.mod": "module m\n\ngo 1.22\n",
	"p/p.go": "package p\n\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n\n" +
		"func Sum(a, b int) int { return a + b }\n\nfunc Greet(s string) string { return \"hi \" + s }\n",
	"q/q_test.go": "package q\n\nimport (\n\t\"testing\"\n\n\t\"m/p\"\n)\n\n" +
		"func TestMax(t *testing.T) {\n\tif p.Max(2, 1) != 2 || p.Max(1, 2) != 2 || p.Sum(1, 2) != 3 {\n\t\tt.Fatal(\"max\")\n\t}\n}\n",
}

// The mutants of cacheModule, each a different change (none is skipped
// as already tested).
var (
	mutMax      = Mutant{Mutator: "CONDITIONALS_NEGATION", File: "p/p.go", Line: 4, Col: 7}
	mutMaxBound = Mutant{Mutator: "CONDITIONALS_BOUNDARY", File: "p/p.go", Line: 4, Col: 7}
	mutSum      = Mutant{Mutator: "ARITHMETIC_BASE", File: "p/p.go", Line: 10, Col: 35}
	mutGreet    = Mutant{Mutator: "ARITHMETIC_BASE", File: "p/p.go", Line: 12, Col: 44}
)

// cacheRunner is a -testpkg runner of cacheModule (p's mutants, q's
// TestMax) with its own build cache in a temporary directory; the user's
// GOCACHE is an empty directory it returns.
func cacheRunner(t *testing.T) (*runner, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	root := t.TempDir()
	writeFiles(t, root, cacheModule)
	user := t.TempDir()
	t.Setenv("GOCACHE", user)
	c, err := openCache(filepath.Join(t.TempDir(), "gocache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.lock.Close() })
	r := &runner{root: root, pkg: "p", coef: 10, floor: time.Minute, work: t.TempDir(), cache: c,
		src: sourceLines{root: root}, done: map[string]Entry{}, other: &otherTests{pkg: "q", run: "^TestMax$"}}
	if r.info, err = listPkg(root, "p", r.goEnv("")); err != nil {
		t.Fatal(err)
	}
	return r, user
}

// modTimes maps each file under dir to its modification time.
func modTimes(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			out[p] = info.ModTime()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dirSize is the bytes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCacheBounded: every go command gen runs builds in gen's own cache,
// never the user's GOCACHE, and past the limit the objects of earlier
// mutants are removed before the next builds: after each mutant the cache
// holds at most the limit plus about one mutant's build, and the unmutated
// builds' objects (std's) are never removed, to be built again.
func TestCacheBounded(t *testing.T) {
	r, user := cacheRunner(t)
	if err := r.prepare("", false); err != nil {
		t.Fatal(err)
	}
	base, kept := dirSize(t, r.cache.dir), modTimes(t, r.cache.dir)
	if base == 0 {
		t.Fatal("the baseline built nothing in gen's cache")
	}
	// Any mutant's build takes it past the limit.
	r.cache.limit = base
	var first int64
	ms := []Mutant{mutMax, mutMaxBound, mutSum, mutMax, mutMaxBound, mutSum}
	want := []string{stKilled, stLived, stKilled, stKilled, stLived, stKilled}
	for i, m := range ms {
		if i == 3 {
			r.done = map[string]Entry{} // built again, not remembered
		}
		e, err := r.test(m)
		if err != nil || e.Status != want[i] {
			t.Fatalf("%s %s: %s, %v; want %s", m.Mutator, m.Pos(), e.Status, err, want[i])
		}
		size := dirSize(t, r.cache.dir)
		if first == 0 {
			if first = size - base; first <= 0 {
				t.Fatalf("a mutant's build added %d bytes to gen's cache, want some", first)
			}
		}
		if size > base+2*first {
			t.Errorf("after mutant %d: cache %d bytes, want at most the limit %d plus about one build (%d)", i+1, size, base, first)
		}
	}
	now := modTimes(t, r.cache.dir)
	for p, mt := range kept {
		if !now[p].Equal(mt) {
			t.Errorf("%s of the unmutated builds was removed (or rewritten)", p)
			break
		}
	}
	if err := r.cache.close(); err != nil {
		t.Fatal(err)
	}
	if size := dirSize(t, r.cache.dir); size > base {
		t.Errorf("closed: cache %d bytes, want the mutants' objects gone (%d)", size, base)
	}
	if ents, err := os.ReadDir(user); err != nil || len(ents) > 0 {
		t.Errorf("the user's GOCACHE holds %d entries (%v), want none", len(ents), err)
	}
}

// TestEnvFailureIsNotViable: a mutant build that fails because the disk
// is full is tried again after gen's cache is emptied (killed then), and
// failing twice stops gen with the reason instead of a NOT VIABLE; a
// mutant that does not compile is NOT VIABLE. go is a script on PATH that
// fails the overlay builds as a full disk does, $FAILS times.
func TestEnvFailureIsNotViable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the go wrapper is a shell script")
	}
	r, _ := cacheRunner(t)
	real, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin, fails := t.TempDir(), filepath.Join(t.TempDir(), "fails")
	script := "#!/bin/sh\ncase \"$1 $GOFLAGS\" in\ntest*-overlay*)\n\tn=$(cat \"$FAILS\")\n" +
		"\tif [ \"$n\" -gt 0 ]; then\n\t\techo $((n-1)) >\"$FAILS\"\n" +
		"\t\techo '# m/p' >&2\n\t\techo 'compile: writing output: write $WORK/b002/_pkg_.a: no space left on device' >&2\n\t\texit 1\n\tfi\nesac\n" +
		"exec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAILS", fails)
	if err := os.WriteFile(fails, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.prepare("", false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m       Mutant
		fails   string
		want    string // status, "" for an error
		wantErr string
	}{
		{mutGreet, "0", stNotViable, ""},
		{mutMax, "1", stKilled, ""},
		{mutMaxBound, "2", "", "no space left on device"},
	} {
		if err := os.WriteFile(fails, []byte(c.fails+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := r.test(c.m)
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s %s, full disk %s times: %s, %v; want an error saying %q", c.m.Mutator, c.m.Pos(), c.fails, e.Status, err, c.wantErr)
		case c.want != "" && (err != nil || e.Status != c.want):
			t.Errorf("%s %s, full disk %s times: %s, %v; want %s", c.m.Mutator, c.m.Pos(), c.fails, e.Status, err, c.want)
		}
	}
}

// TestEnvFailure: the host's failures are named whatever else the output
// says; only a compile error at a position is the mutant's.
func TestEnvFailure(t *testing.T) {
	exit1 := exec.Command("sh", "-c", "exit 1").Run()
	killed := exec.Command("sh", "-c", "kill -9 $$").Run()
	for _, c := range []struct {
		out  string
		err  error
		want string
	}{
		{"# m/p\np/p.go:12:44: invalid operation: operator - not defined on \"hi \" (untyped string constant)\n", exit1, ""},
		{"# m/p\ncompile: writing output: write /tmp/b002/_pkg_.a: No space left on device\n", exit1, "no space left on device"},
		{"# m/p\np/p.go:3:1: open /root/.cache/go-build/ab/x-d: no space left on device\n", exit1, "no space left on device"},
		{"fatal error: runtime: out of memory\n", exit1, "out of memory"},
		{"# m/p\n/usr/local/go/pkg/tool/linux_amd64/compile: signal: killed\n", exit1, "signal: killed"},
		{"", killed, "go was killed"},
		{"", errors.New("exec: \"go\": executable file not found in $PATH"), "go did not run"},
		{"go: updates to go.mod needed\n", exit1, "a failure with no compile error"},
	} {
		if exit1 == nil || killed == nil {
			t.Fatal("sh exited 0")
		}
		if got := envFailure(c.out, c.err); got != c.want {
			t.Errorf("envFailure(%q, %v) = %q, want %q", c.out, c.err, got, c.want)
		}
	}
}

// TestCacheTrim: past the limit, trim removes the entries added since
// the snapshot, a go run executable's directory included, and keeps the
// snapshot's; still past it, it empties the cache; go's own files (not
// in a two-digit directory) stay.
func TestCacheTrim(t *testing.T) {
	c, err := openCache(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.lock.Close()
	write := func(files map[string]int) {
		for name, n := range files {
			writeFiles(t, c.dir, map[string]string{name: strings.Repeat("x", n)})
		}
	}
	exist := func(names ...string) (n int) {
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(c.dir, name)); err == nil {
				n++
			}
		}
		return n
	}
	write(map[string]int{"README": 50, "ab/old-a": 100, "cd/old-d/tool": 100})
	if err := c.snapshot(); err != nil {
		t.Fatal(err)
	}
	write(map[string]int{"ab/new-a": 1000, "ef/new-d/gremlins": 1000})
	c.limit = 2100 // the entries hold 2200 bytes
	if err := c.trim(); err != nil {
		t.Fatal(err)
	}
	if n := exist("README", "ab/old-a", "cd/old-d/tool"); n != 3 {
		t.Errorf("trimmed past the limit: %d of README and the snapshot's 2 entries left, want all", n)
	}
	if n := exist("ab/new-a", "ef/new-d"); n != 0 {
		t.Errorf("trimmed past the limit: %d of the 2 new entries left, want none", n)
	}
	c.limit = 150 // the snapshot's own 200 bytes are past it
	if err := c.trim(); err != nil {
		t.Fatal(err)
	}
	if n := exist("README", "ab/old-a", "cd/old-d/tool"); n != 1 {
		t.Errorf("the snapshot past the limit: %d of README and 2 entries left, want README alone", n)
	}
}

// TestByteSize: -cache-limit reads sizes as the config does (units).
func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8G", 8 << 30, true}, {"8GiB", 8 << 30, true}, {"500M", 500 << 20, true},
		{"123", 123, true}, {"0", 0, true}, {"1T", 1 << 40, true}, {"2KB", 2000, true},
		{"-1", 0, false}, {"8X", 0, false}, {"500m", 0, false}, {"99999999T", 0, false},
	} {
		var b byteSize
		err := b.Set(c.in)
		if (err == nil) != c.ok || c.ok && int64(b) != c.want {
			t.Errorf("Set(%q) = %d, %v; want %d (ok %v)", c.in, b, err, c.want, c.ok)
		}
	}
}
