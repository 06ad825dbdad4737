package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The references a document or a comment makes, each checked against the
// tree: a file path ("pool/daemon/wire.go"), a section of a Markdown file
// (docs/ops.md ("Metrics"), design.md, "The sandbox", ops.md#metrics), a
// function, type or variable named beside its file ("`enterFor` in
// `registry.go`", "`Exec` (`exec.go`)") and an identifier of one of the
// repository's packages (pool.Observer, `kernel.Kernel.Exec`).
var (
	// pathRef: a path starting at a top-level entry (checked against the
	// tree's own top level, so "/usr/bin/python3" or "a/b" never match).
	pathRef = regexp.MustCompile("(?:^|[\\s(`\"'\\[,])((?:\\.ci|[a-z][a-z0-9_-]*)/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
	// qualified is the identifier part of a package path "pool/api.Client".
	qualified = regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$`)
	// sectionRef: FILE.md followed by a quoted heading, or FILE.md#anchor.
	sectionRef = regexp.MustCompile(`([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)(?:,\s*(?:section\s+)?|\s*\(\s*(?:section\s+)?)"([^"\n]+)"|([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)#([a-z0-9-]+)`)
	// namedInFile: `NAME` in `FILE` or `NAME` (`FILE`), FILE a .go or .py.
	namedInFile = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.]*)(?:\\(\\))?` (?:in `([A-Za-z0-9_./-]+\\.(?:go|py))`|\\(`([A-Za-z0-9_./-]+\\.(?:go|py))`\\))")
	// pkgIdent: pkg.Name or pkg.Type.Member for an exported Name.
	pkgIdent = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?`)
)

// tree is what the references resolve against.
type tree struct {
	root     string
	top      map[string]bool            // top-level entries
	ignored  []string                   // .gitignore'd prefixes (generated)
	byBase   map[string][]string        // base name -> repo-relative paths
	pkgDecls map[string]map[string]bool // package name -> "Name", "Type.Member"
}

// readTree indexes the repository under root.
func readTree(t *testing.T, root string) *tree {
	t.Helper()
	tr := &tree{root: root, top: map[string]bool{}, byBase: map[string][]string{}, pkgDecls: map[string]map[string]bool{}}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		tr.top[e.Name()] = true
	}
	if gi, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, l := range strings.Split(string(gi), "\n") {
			if strings.HasPrefix(l, "/") {
				tr.ignored = append(tr.ignored, strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/"))
			}
		}
	}
	fset := token.NewFileSet()
	err = walkTree(root, func(rel string) error {
		tr.byBase[filepath.Base(rel)] = append(tr.byBase[filepath.Base(rel)], rel)
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // a file the compiler rejects is not this test's to report
		}
		decls := tr.pkgDecls[f.Name.Name]
		if decls == nil {
			decls = map[string]bool{}
			tr.pkgDecls[f.Name.Name] = decls
		}
		for name := range declared(f) {
			decls[name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// walkTree calls fn with the repo-relative path of every file that is not
// under .git, a testdata dir or a generated (ignored) dir.
func walkTree(root string, fn func(rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "__pycache__", ".cache", "out", "out-v1", "out-systemd", ".vagrant":
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		return fn(filepath.ToSlash(rel))
	})
}

// declared lists a Go file's top-level names, "Type.Method" for its
// methods and "Type.Field" for its struct fields.
func declared(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				out[d.Name.Name] = true
				continue
			}
			typ := d.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if ix, ok := typ.(*ast.IndexExpr); ok {
				typ = ix.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				out[id.Name+"."+d.Name.Name] = true
				out[d.Name.Name] = true // "`Exec` (`exec.go`)" names a method bare
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								out[s.Name.Name+"."+n.Name] = true
							}
						}
					}
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								out[s.Name.Name+"."+n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out[n.Name] = true
					}
				}
			}
		}
	}
	return out
}

// fileHas reports whether the file at rel declares name (the last part of
// a dotted name): a Go declaration, or a Python def, class or assignment.
func (tr *tree) fileHas(rel, name string) bool {
	b, err := os.ReadFile(filepath.Join(tr.root, rel))
	if err != nil {
		return false
	}
	parts := strings.Split(name, ".")
	last := parts[len(parts)-1]
	if strings.HasSuffix(rel, ".py") {
		return regexp.MustCompile(`(?m)^\s*(?:def|class)\s+` + last + `\b|^\s*` + last + `\s*[:=]`).Match(b)
	}
	f, err := parser.ParseFile(token.NewFileSet(), rel, b, parser.SkipObjectResolution)
	if err != nil {
		return false
	}
	d := declared(f)
	if len(parts) >= 2 && d[parts[len(parts)-2]+"."+last] {
		return true
	}
	return d[last]
}

// resolve finds the files a reference to name (a path or a base name)
// from the file at from may mean: the path from the root, from the
// citing file's directory, or any file of that base name.
func (tr *tree) resolve(from, name string) []string {
	for _, c := range []string{name, filepath.ToSlash(filepath.Join(filepath.Dir(from), name))} {
		if _, err := os.Stat(filepath.Join(tr.root, c)); err == nil {
			return []string{c}
		}
	}
	var out []string
	for _, c := range tr.byBase[filepath.Base(name)] {
		if strings.HasSuffix(c, "/"+name) || c == name || !strings.Contains(name, "/") {
			out = append(out, c)
		}
	}
	return out
}

// headings returns the headings of a Markdown file, without their #s and
// backticks, and their GitHub anchors.
func headings(doc string) (titles []string, anchors map[string]bool) {
	anchors = map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.ReplaceAll(strings.TrimLeft(l, "#"), "`", ""))
		titles = append(titles, h)
		anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return titles, anchors
}

// ignoredPath reports a path under a generated (gitignored) directory, or
// one naming a placeholder rather than a file.
func (tr *tree) ignoredPath(p string) bool {
	if strings.ContainsAny(p, "*<>{}$") || strings.Contains(p, "...") || strings.Contains(p, "XXX") {
		return true
	}
	for _, ig := range tr.ignored {
		if p == ig || strings.HasPrefix(p, ig+"/") {
			return true
		}
	}
	return false
}

// check returns one message per reference in text (from the file at rel)
// that the tree does not resolve.
func (tr *tree) check(rel, text string) []string {
	var bad []string
	for _, m := range pathRef.FindAllStringSubmatch(text, -1) {
		// pool/api.Client names a declaration of the package at the path.
		p := qualified.ReplaceAllString(strings.TrimRight(m[1], "."), "")
		if !tr.top[strings.SplitN(p, "/", 2)[0]] || tr.ignoredPath(p) {
			continue
		}
		if _, err := os.Stat(filepath.Join(tr.root, p)); err != nil {
			bad = append(bad, fmt.Sprintf("%s: no such file or directory", p))
		}
	}
	for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
		file, title, anchor := m[1], m[2], ""
		if file == "" {
			file, anchor = m[3], m[4]
		}
		files := tr.resolve(rel, file)
		if len(files) == 0 {
			files = tr.resolve(rel, "docs/"+filepath.Base(file))
		}
		if len(files) == 0 {
			bad = append(bad, fmt.Sprintf("%s: no such document", file))
			continue
		}
		b, _ := os.ReadFile(filepath.Join(tr.root, files[0]))
		titles, anchors := headings(string(b))
		switch {
		case anchor != "" && !anchors[anchor]:
			bad = append(bad, fmt.Sprintf("%s#%s: %s has no such heading", file, anchor, files[0]))
		case title != "" && !slices.ContainsFunc(titles, func(h string) bool {
			return strings.Contains(strings.ToLower(h), strings.ToLower(title))
		}):
			bad = append(bad, fmt.Sprintf("%s %q: %s has no such heading", file, title, files[0]))
		}
	}
	for _, m := range namedInFile.FindAllStringSubmatch(text, -1) {
		name, file := m[1], m[2]+m[3]
		files := tr.resolve(rel, file)
		if !slices.ContainsFunc(files, func(f string) bool { return tr.fileHas(f, name) }) {
			bad = append(bad, fmt.Sprintf("`%s` in `%s`: not declared there (%v)", name, file, files))
		}
	}
	for _, m := range pkgIdent.FindAllStringSubmatch(text, -1) {
		decls, ok := tr.pkgDecls[m[1]]
		if !ok || m[1] == "main" {
			continue // not one of the repository's packages
		}
		switch {
		case !decls[m[2]]:
			bad = append(bad, fmt.Sprintf("%s.%s: package %s declares no %s", m[1], m[2], m[1], m[2]))
		case m[3] != "" && isType(decls, m[2]) && !decls[m[2]+"."+m[3]]:
			bad = append(bad, fmt.Sprintf("%s.%s.%s: %s.%s has no %s", m[1], m[2], m[3], m[1], m[2], m[3]))
		}
	}
	return bad
}

// isType reports whether name has members recorded (a type of the package).
func isType(decls map[string]bool, name string) bool {
	for d := range decls {
		if strings.HasPrefix(d, name+".") {
			return true
		}
	}
	return false
}

// commentText is what a file says to its reader: a Go file's comments,
// a Markdown file whole.
func commentText(path string, b []byte) string {
	if !strings.HasSuffix(path, ".go") {
		return string(b)
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, cg := range f.Comments {
		sb.WriteString(cg.Text())
		sb.WriteString("\n")
	}
	return sb.String()
}

// TestReferencesResolve: every file, section and declaration the docs and
// the code's comments name exists.
func TestReferencesResolve(t *testing.T) {
	root := repoRoot(t)
	tr := readTree(t, root)
	checked := 0
	err := walkTree(root, func(rel string) error {
		if !strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, ".md") || strings.HasPrefix(rel, "internal/doccheck/") {
			return nil // doccheck: its tests' made-up references
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		checked++
		for _, msg := range tr.check(rel, commentText(rel, b)) {
			t.Errorf("%s: %s", rel, msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Errorf("checked %d files; the tree has hundreds: is the walk reading it?", checked)
	}
}

// TestDanglingReferencesAreFound: the checker itself, on a made-up tree.
func TestDanglingReferencesAreFound(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/ops.md", "# Ops\n\n## Metrics\n\n## The `isolation` key\n")
	write("pool/registry.go", "package pool\n\ntype Pool struct{ Observer int }\n\nfunc (p *Pool) enterFor() {}\n\nfunc New() {}\n")
	write("kernel/runner.py", "def begin():\n    pass\n_LIMIT = 3\n")
	tr := readTree(t, root)
	for _, tc := range []struct {
		text string
		bad  int
	}{
		{"see docs/ops.md and pool/registry.go", 0},
		{"see docs/metrics.md and pool/gone.go", 2},
		{"see /usr/bin/python3 and a/b/c.go", 0},
		{`docs/ops.md ("Metrics"), ops.md, "isolation", ops.md#metrics`, 0},
		{`docs/ops.md ("Tracing"), ops.md#tracing`, 2},
		{"`enterFor` in `registry.go`, `Pool.enterFor` (`pool/registry.go`), `begin` in `kernel/runner.py`", 0},
		{"`enter` in `registry.go`, `end` in `runner.py`", 2},
		{"`Pool` (`pool/registry.go` adapts it)", 0},
		{"see pool.Pool, kernel/runner.py. Also pool/registry.go.", 0},
		{"pool.Pool.Observer, pool.New, `pool.Pool.enterFor`", 0},
		{"pool.Gone, pool.Pool.Missing, fmt.Errorf, docs.Ops", 2},
	} {
		if got := tr.check("docs/x.md", tc.text); len(got) != tc.bad {
			t.Errorf("%q: %d dangling (%v), want %d", tc.text, len(got), got, tc.bad)
		}
	}
}
