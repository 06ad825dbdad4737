package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mutant schemata: every mutant of a function is compiled into one build,
// each as a copy of the function that the function's first line calls
// when the running binary selects it (0: none). A test binary is then
// built once for all its mutants instead of once per mutant: the compile
// and link were most of a mutant's cost.
//
// The running binary selects its mutant by a file beside it, not by the
// environment: tests start children from their own executable (the CLI
// tests run the daemon that way) with environments of their own, and a
// child running the original beside a mutated parent could fail where the
// real mutant would not. The mutant's id is in "<executable>.mutant".
const (
	schemaPrefix   = "kpm"                      // copies are <name>_kpm<id>
	schemaSelector = "zz_kernpool_mutant_id.go" // the file added to each schematized package
	schemaSuffix   = ".mutant"                  // beside the executable: the selected mutant's id
)

// schemaMutant is one mutation of a file, by the id its copy is called by.
type schemaMutant struct {
	id         int
	find, repl string
}

// schematize rewrites src (the Go file at path) so that each mutant it
// can place runs when its id is selected. It returns the new source and,
// per mutant it could not place (a change outside a function, in init,
// under a compiler directive, or to the signature), why not. done lists
// the ids placed.
//
// A function with mutants keeps its name and body; its first line gains
// a switch that calls the selected mutant's copy, appended at the end of
// the file. So with no mutant selected every line, name and stack is the
// original's (tests match goroutines by function name), and a copy keeps
// the original's line numbers through a //line directive.
func schematize(path string, src []byte, muts []schemaMutant) (out []byte, done []int, skipped map[int]string) {
	skipped = map[int]string{}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		for _, m := range muts {
			skipped[m.id] = "the file does not parse: " + err.Error()
		}
		return src, nil, skipped
	}
	base := fset.File(f.Pos()).Base()
	off := func(p token.Pos) int { return int(p) - base }
	byFunc := map[*ast.FuncDecl][]schemaMutant{}
	for _, m := range muts {
		at := bytes.Index(src, []byte(m.find))
		if at < 0 || bytes.Count(src, []byte(m.find)) != 1 {
			skipped[m.id] = "the snippet does not occur exactly once"
			continue
		}
		fd := enclosingFunc(f, off, at, at+len(m.find))
		why := unplaceable(fd)
		if why == "" && !keepsSignature(src, fd, off, m) {
			why = "the mutant changes the function's signature"
		}
		if why != "" {
			skipped[m.id] = why
			continue
		}
		byFunc[fd] = append(byFunc[fd], m)
	}
	fds := make([]*ast.FuncDecl, 0, len(byFunc))
	for fd := range byFunc {
		fds = append(fds, fd)
	}
	// Splice from the end, so earlier offsets stay valid; copies in
	// source order after the file.
	sort.Slice(fds, func(i, j int) bool { return fds[i].Pos() > fds[j].Pos() })
	out = append([]byte{}, src...)
	var copies [][]byte
	for _, fd := range fds {
		head, cs, ids := dispatch(path, fset, src, fd, off, byFunc[fd])
		out = append(append(append([]byte{}, out[:off(fd.Pos())]...), head...), out[off(fd.Body.Lbrace)+1:]...)
		copies = append(cs, copies...)
		done = append(done, ids...)
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	for _, c := range copies {
		out = append(append(out, '\n'), c...)
		out = append(out, '\n')
	}
	sort.Ints(done)
	return out, done, skipped
}

// enclosingFunc is the function (with a body) that holds [from, to), or
// nil.
func enclosingFunc(f *ast.File, off func(token.Pos) int, from, to int) *ast.FuncDecl {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if ok && fd.Body != nil && off(fd.Pos()) <= from && to <= off(fd.End()) {
			return fd
		}
	}
	return nil
}

// keepsSignature says whether fd (in src) with m applied is still one
// function of the same name and signature: the switch calling its copy
// sits in the original.
func keepsSignature(src []byte, fd *ast.FuncDecl, off func(token.Pos) int, m schemaMutant) bool {
	fn := src[off(fd.Pos()):off(fd.End())]
	text := append([]byte("package p\n\n"), bytes.Replace(fn, []byte(m.find), []byte(m.repl), 1)...)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", text, parser.SkipObjectResolution)
	if err != nil || len(f.Decls) != 1 {
		return false
	}
	mfd, ok := f.Decls[0].(*ast.FuncDecl)
	if !ok || mfd.Body == nil {
		return false
	}
	base := fset.File(f.Pos()).Base()
	return string(text[int(mfd.Pos())-base:int(mfd.Body.Lbrace)-base]) == string(src[off(fd.Pos()):off(fd.Body.Lbrace)])
}

// unplaceable says why a mutant in fd cannot get a copy, or "".
func unplaceable(fd *ast.FuncDecl) string {
	switch {
	case fd == nil:
		return "the change is not inside a function body"
	case fd.Recv == nil && fd.Name.Name == "init":
		return "the change is in an init function, which cannot be called"
	case fd.Doc != nil && directives(fd.Doc):
		return "the function has a compiler directive, which a copy would lose"
	}
	return ""
}

// directives says whether a comment group holds a //go: line.
func directives(g *ast.CommentGroup) bool {
	for _, c := range g.List {
		if strings.HasPrefix(c.Text, "//go:") {
			return true
		}
	}
	return false
}

// dispatch returns fd's new head (its signature with every parameter
// named, the opening brace and the switch, on as many lines as the old
// head took) and its mutants' copies.
func dispatch(path string, fset *token.FileSet, src []byte, fd *ast.FuncDecl, off func(token.Pos) int, muts []schemaMutant) (head []byte, copies [][]byte, ids []int) {
	start, end := off(fd.Pos()), off(fd.End())
	name := fd.Name.Name
	nameAt := off(fd.Name.Pos()) - start
	orig := src[start:end]
	sig, call := forward(src, fd, off)
	var b bytes.Buffer
	b.WriteString(sig)
	b.WriteString(" { switch kpmActive {")
	for _, m := range muts {
		mutant := bytes.Replace(orig, []byte(m.find), []byte(m.repl), 1)
		var c bytes.Buffer
		fmt.Fprintf(&c, "//line %s:%d\n", path, fset.Position(fd.Pos()).Line)
		c.Write(mutant[:nameAt])
		c.WriteString(copyName(name, m.id))
		c.Write(mutant[nameAt+len(name):])
		copies = append(copies, c.Bytes())
		fmt.Fprintf(&b, " case %d: %s;", m.id, call(m.id))
		ids = append(ids, m.id)
	}
	b.WriteString(" };")
	b.Write(bytes.Repeat([]byte("\n"), bytes.Count(src[start:off(fd.Body.Lbrace)], []byte("\n"))))
	return b.Bytes(), copies, ids
}

// copyName names mutant id's copy of function name. The original name
// comes first, so a goroutine's "created by" line still names it.
func copyName(name string, id int) string {
	return name + "_" + schemaPrefix + strconv.Itoa(id)
}

// forward returns fd's signature with every receiver and parameter named
// (blank and unnamed ones get names), and a func making the statement
// that calls copy id with them and returns what it returns.
func forward(src []byte, fd *ast.FuncDecl, off func(token.Pos) int) (string, func(int) string) {
	text := func(n ast.Node) string { return string(src[off(n.Pos()):off(n.End())]) }
	n := 0
	fields := func(fl *ast.FieldList) (decl, args []string) {
		if fl == nil {
			return nil, nil
		}
		for _, fld := range fl.List {
			names := fld.Names
			if len(names) == 0 {
				names = []*ast.Ident{{Name: "_"}}
			}
			for _, id := range names {
				nm := id.Name
				if nm == "_" {
					nm = schemaPrefix + "A" + strconv.Itoa(n)
				}
				n++
				decl = append(decl, nm+" "+text(fld.Type))
				arg := nm
				if _, ok := fld.Type.(*ast.Ellipsis); ok {
					arg += "..."
				}
				args = append(args, arg)
			}
		}
		return decl, args
	}
	var sig strings.Builder
	sig.WriteString("func ")
	recv := ""
	if fd.Recv != nil {
		decl, args := fields(fd.Recv)
		sig.WriteString("(" + decl[0] + ") ")
		recv = args[0] + "."
	}
	sig.WriteString(fd.Name.Name)
	targs := ""
	if tp := fd.Type.TypeParams; tp != nil {
		sig.WriteString(text(tp))
		var names []string
		for _, fld := range tp.List {
			for _, id := range fld.Names {
				names = append(names, id.Name)
			}
		}
		targs = "[" + strings.Join(names, ", ") + "]"
	}
	decl, args := fields(fd.Type.Params)
	sig.WriteString("(" + strings.Join(decl, ", ") + ")")
	if r := fd.Type.Results; r != nil {
		sig.WriteString(" " + text(r))
	}
	results := fd.Type.Results != nil && len(fd.Type.Results.List) > 0
	call := func(id int) string {
		c := recv + copyName(fd.Name.Name, id) + targs + "(" + strings.Join(args, ", ") + ")"
		if results {
			return "return " + c
		}
		return c + "; return"
	}
	return sig.String(), call
}

// selectorFile is the file added to a schematized package: kpmActive, the
// id in the file beside the running executable (0 when there is none).
func selectorFile(pkg string) []byte {
	return []byte(`// Code generated by internal/mutate (mutant schemata). DO NOT EDIT.

package ` + pkg + `

import (
	"os"
	"strconv"
	"strings"
)

var kpmActive = func() int {
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	b, err := os.ReadFile(exe + "` + schemaSuffix + `")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}()
`)
}

// packageName reads the package clause of a Go file.
func packageName(src []byte) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	return f.Name.Name, nil
}

// schemaEligible says why m cannot run in a schemata build, or "": only
// a change to a package's Go source (not its tests), with no build tags
// (the integration tests build their own daemon), outside isolate/kinit
// (its code runs in the kernel's init step, in a mount namespace where
// the file beside the executable may be out of reach).
func schemaEligible(m Mutation) string {
	switch {
	case !strings.HasSuffix(m.File, ".go") || strings.HasSuffix(m.File, "_test.go"):
		return "not a package's Go source"
	case m.Tags != "":
		return "build tags " + m.Tags
	case filepath.ToSlash(filepath.Dir(m.File)) == "isolate/kinit":
		return "isolate/kinit runs in the kernel's init step"
	}
	return ""
}
