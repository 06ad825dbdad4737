package main

import (
	"encoding/json"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Mutant is one of gremlins' mutants: a token at File:Line:Col (File from
// the repository root) replaced as Mutator says.
type Mutant struct {
	Mutator string
	File    string
	Line    int
	Col     int
}

func (m Mutant) Pos() string { return fmt.Sprintf("%s:%d:%d", m.File, m.Line, m.Col) }

// replacements is gremlins v0.6.0's tokenMutations table
// (the mappings of its engine package): what each mutator turns a token into.
var replacements = map[string]map[token.Token]token.Token{
	"ARITHMETIC_BASE": {token.ADD: token.SUB, token.MUL: token.QUO, token.QUO: token.MUL,
		token.REM: token.MUL, token.SUB: token.ADD},
	"CONDITIONALS_BOUNDARY": {token.GEQ: token.GTR, token.GTR: token.GEQ, token.LEQ: token.LSS,
		token.LSS: token.LEQ},
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.GEQ: token.LSS, token.GTR: token.LEQ,
		token.LEQ: token.GTR, token.LSS: token.GEQ, token.NEQ: token.EQL},
	"INCREMENT_DECREMENT": {token.DEC: token.INC, token.INC: token.DEC},
	"INVERT_ASSIGNMENTS": {token.ADD_ASSIGN: token.SUB_ASSIGN, token.MUL_ASSIGN: token.QUO_ASSIGN,
		token.QUO_ASSIGN: token.MUL_ASSIGN, token.REM_ASSIGN: token.REM_ASSIGN,
		token.SUB_ASSIGN: token.ADD_ASSIGN},
	"INVERT_BITWISE": {token.AND: token.OR, token.OR: token.AND, token.XOR: token.AND,
		token.AND_NOT: token.AND, token.SHL: token.SHR, token.SHR: token.SHL},
	"INVERT_BWASSIGN": {token.AND_ASSIGN: token.OR_ASSIGN, token.OR_ASSIGN: token.AND_ASSIGN,
		token.XOR_ASSIGN: token.AND_ASSIGN, token.AND_NOT_ASSIGN: token.AND_ASSIGN,
		token.SHL_ASSIGN: token.SHR_ASSIGN, token.SHR_ASSIGN: token.SHL_ASSIGN},
	"INVERT_LOGICAL":   {token.LAND: token.LOR, token.LOR: token.LAND},
	"INVERT_LOOPCTRL":  {token.BREAK: token.CONTINUE, token.CONTINUE: token.BREAK},
	"INVERT_NEGATIVES": {token.SUB: token.ADD},
	"REMOVE_SELF_ASSIGNMENTS": {token.ADD_ASSIGN: token.ASSIGN, token.AND_ASSIGN: token.ASSIGN,
		token.AND_NOT_ASSIGN: token.ASSIGN, token.MUL_ASSIGN: token.ASSIGN, token.OR_ASSIGN: token.ASSIGN,
		token.QUO_ASSIGN: token.ASSIGN, token.REM_ASSIGN: token.ASSIGN, token.SHL_ASSIGN: token.ASSIGN,
		token.SHR_ASSIGN: token.ASSIGN, token.SUB_ASSIGN: token.ASSIGN, token.XOR_ASSIGN: token.ASSIGN},
}

// apply returns src with the mutant's token replaced, and the byte offset
// and new token (two mutators making the same change share them). The
// token found at the position must be one the mutator changes: a list that
// no longer matches the file is an error, not a silent other mutant.
func apply(src []byte, m Mutant) (out []byte, off int, repl string, err error) {
	fset := token.NewFileSet()
	f := fset.AddFile(m.File, -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return nil, 0, "", fmt.Errorf("%s: no token at %s", m.Mutator, m.Pos())
		}
		p := f.Position(pos)
		if p.Line < m.Line || p.Line == m.Line && p.Column < m.Col {
			continue
		}
		if p.Line != m.Line || p.Column != m.Col {
			return nil, 0, "", fmt.Errorf("%s: no token starts at %s", m.Mutator, m.Pos())
		}
		to, ok := replacements[m.Mutator][tok]
		if !ok {
			return nil, 0, "", fmt.Errorf("%s does not change %q at %s", m.Mutator, tok, m.Pos())
		}
		off = f.Offset(pos)
		out = make([]byte, 0, len(src)+2)
		out = append(append(append(out, src[:off]...), to.String()...), src[off+len(tok.String()):]...)
		return out, off, to.String(), nil
	}
}

// gremlinsReport is the part of gremlins' JSON report read here.
type gremlinsReport struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// listMutants runs gremlins' dry run in the package directory and returns
// its mutants, in its order. gremlins is the command line that runs it
// (`go run module@version`); excludes are its -E regexps; env is gen's
// go environment.
func listMutants(root, pkg, gremlins, reportFile string, excludes, env []string) ([]Mutant, error) {
	args := strings.Fields(gremlins)
	args = append(args, "unleash", "--dry-run", "-o", reportFile)
	for _, e := range excludes {
		args = append(args, "-E", e)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = filepath.Join(root, pkg)
	// No test runs in gremlins' coverage pass: only the list is used.
	cmd.Env = append(env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -vet=off -count=1 -run=^$"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gremlins dry run: %v\n%s", err, tail(string(out), 20))
	}
	b, err := os.ReadFile(reportFile)
	if err != nil {
		return nil, err
	}
	var r gremlinsReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", reportFile, err)
	}
	var ms []Mutant
	for _, f := range r.Files {
		for _, m := range f.Mutations {
			ms = append(ms, Mutant{Mutator: m.Type, File: filepath.ToSlash(filepath.Join(pkg, f.FileName)), Line: m.Line, Col: m.Column})
		}
	}
	return ms, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
