package main

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/integration/wine/wintest"
)

// TestListIsComplete: the kept list parses, has at least 40 mutations and
// covers every package of the project.
func TestListIsComplete(t *testing.T) {
	ms, err := parseList("mutations.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 40 {
		t.Errorf("%d mutations, want at least 40", len(ms))
	}
	covered := map[string]bool{}
	for _, m := range ms {
		covered[path.Dir(m.File)] = true
	}
	for _, pkg := range []string{"cgroup", "cmd/kernpool", "envscrub", "isolate", "kernel", "pool", "pool/api", "rpcsock", "integration"} {
		if !covered[pkg] {
			t.Errorf("no mutation in %s", pkg)
		}
	}
}

func TestParseListRejects(t *testing.T) {
	for name, text := range map[string]string{
		"missing why":    "name: a\nfile: f.go\nfind: x\nrepl: y\npkg: ./p/\nrun: T\n",
		"no-op":          "name: a\nfile: f.go\nfind: x\nrepl: x\npkg: ./p/\nrun: T\nwhy: w\n",
		"unknown key":    "name: a\nfile: f.go\nfind: x\nrepl: y\npkg: ./p/\nrun: T\nwhy: w\nwhat: z\n",
		"duplicate name": "name: a\nfile: f.go\nfind: x\nrepl: y\npkg: ./p/\nrun: T\nwhy: w\n\nname: a\nfile: f.go\nfind: z\nrepl: y\npkg: ./p/\nrun: T\nwhy: w\n",
		"no separator":   "name a\n",
		"glued records":  "name: a\nfile: f.go\nfind: x\nrepl: y\npkg: ./p/\nrun: T\nwhy: w\nname: b\nfile: f.go\nfind: z\nrepl: y\npkg: ./p/\nrun: T\nwhy: w\n",
		"bad timeout":    "name: a\nfile: f.go\nfind: x\nrepl: y\npkg: ./p/\nrun: T\nwhy: w\ntimeout: soon\n",
	} {
		path := filepath.Join(wintest.TempDir(t), "list.txt")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := parseList(path); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestParseListKeepsSnippetsVerbatim(t *testing.T) {
	path := filepath.Join(wintest.TempDir(t), "list.txt")
	text := "# comment\nname: a\nfile: f.go\nfind: if x := f(\"a: b\"); x {\nrepl:  y \npkg: ./p/ ./q/\nrun: ^T$\ntags: integration\ntimeout: 30s\nwhy: w\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := parseList(path)
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if len(ms) != 1 || m.Find != `if x := f("a: b"); x {` || m.Repl != " y " || strings.Join(m.Pkgs, ",") != "./p/,./q/" ||
		m.Tags != "integration" || m.Timeout.Seconds() != 30 || m.Line != 2 {
		t.Fatalf("parsed %+v", ms)
	}
}

func TestSelectSampleIsFixedAndSpread(t *testing.T) {
	var ms []Mutation
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		ms = append(ms, Mutation{Name: n})
	}
	got, err := selectMutations(ms, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
	}
	if strings.Join(names, "") != "acfh" {
		t.Fatalf("sample of 4 = %v, want a c f h", names)
	}
	if got, _ := selectMutations(ms, "^[bd]$", 0); len(got) != 2 {
		t.Fatalf("-only selected %d", len(got))
	}
	if _, err := selectMutations(ms, "^z$", 0); err == nil {
		t.Fatal("an empty selection is an error")
	}
}
