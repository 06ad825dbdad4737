package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// citation matches "parity §N", "parity §N rule K" and "parity §N rules K-L".
var citation = regexp.MustCompile(`parity §(\d+)(?:\s+rules?\s+(\d+)(?:\s*-\s*(\d+))?)?`)

// sectionHeading and ruleItem are how docs/parity.md numbers its sections
// ("## 1. The child environment") and the rules inside one ("1. **...").
var (
	sectionHeading = regexp.MustCompile(`^## (\d+)\. `)
	ruleItem       = regexp.MustCompile(`^(\d+)\. `)
)

// outline maps each section number of the parity document to its set of
// rule numbers (empty for a section without numbered rules).
func outline(doc string) map[int]map[int]bool {
	out := map[int]map[int]bool{}
	sec := 0
	for _, line := range strings.Split(doc, "\n") {
		if m := sectionHeading.FindStringSubmatch(line); m != nil {
			sec, _ = strconv.Atoi(m[1])
			out[sec] = map[int]bool{}
		} else if m := ruleItem.FindStringSubmatch(line); m != nil && sec > 0 {
			n, _ := strconv.Atoi(m[1])
			out[sec][n] = true
		}
	}
	return out
}

// dangling returns a message for every citation in text that the outline
// does not resolve.
func dangling(o map[int]map[int]bool, text string) []string {
	var bad []string
	for _, m := range citation.FindAllStringSubmatch(text, -1) {
		sec, _ := strconv.Atoi(m[1])
		rules, ok := o[sec]
		if !ok {
			bad = append(bad, fmt.Sprintf("%q: docs/parity.md has no section %d", m[0], sec))
			continue
		}
		if m[2] == "" {
			continue
		}
		from, _ := strconv.Atoi(m[2])
		to := from
		if m[3] != "" {
			to, _ = strconv.Atoi(m[3])
		}
		for r := from; r <= to; r++ {
			if !rules[r] {
				bad = append(bad, fmt.Sprintf("%q: section %d of docs/parity.md has no rule %d", m[0], sec, r))
			}
		}
	}
	return bad
}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestParityCitationsResolve: every "parity §N [rule K]" in the code and the
// docs names a section (and rule) docs/parity.md has.
func TestParityCitationsResolve(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "parity.md"))
	if err != nil {
		t.Fatal(err)
	}
	o := outline(string(doc))
	if len(o) == 0 {
		t.Fatal("docs/parity.md has no numbered sections")
	}
	cited := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "doccheck": // doccheck: this test's made-up citations
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".py", ".sh", ".hcl", ".txt":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		cited += len(citation.FindAllIndex(b, -1))
		for _, msg := range dangling(o, string(b)) {
			t.Errorf("%s: %s", rel, msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 20 {
		t.Errorf("found %d parity citations; the code has dozens: is the walk reading the tree?", cited)
	}
}

// TestDanglingCitationsAreFound: the checker itself, on a made-up document.
func TestDanglingCitationsAreFound(t *testing.T) {
	o := outline("# T\n\n## 1. One\n\n1. a\n2. b\n\n## 3. Three\n\ntext\n")
	for _, tc := range []struct {
		text string
		bad  int
	}{
		{"see parity §1 and parity §3", 0},
		{"parity §1 rule 2", 0},
		{"parity §1 rules 1-2", 0},
		{"parity §2", 1},
		{"parity §1 rule 3", 1},
		{"parity §1 rules 1-4", 2},
		{"parity §3 rule 1", 1},
		{"parity §12", 1},
	} {
		if got := dangling(o, tc.text); len(got) != tc.bad {
			t.Errorf("%q: %d dangling (%v), want %d", tc.text, len(got), got, tc.bad)
		}
	}
}
