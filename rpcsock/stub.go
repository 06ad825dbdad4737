package rpcsock

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

//go:embed stub.py
var stubTemplate string

// stubMarker is where the tool table goes in stub.py, maxConnsMarker
// where the connection cap goes.
const (
	stubMarker     = "# @@GENERATED@@"
	maxConnsMarker = "@@MAXCONNS@@"
)

// reservedIdents are the stub's own public names; a tool mapping to one of
// them gets a "_" suffix so it cannot replace the module's machinery.
var reservedIdents = []string{"call", "ToolError", "ToolTimeout", "TOOLS", "FUNCTIONS", "DEFAULT_TIMEOUT"}

// Stub returns the source of kernpool_tools.py for the tool set: one
// function per tool (names mapped to identifiers by PyIdent, collisions
// numbered) plus call(name, **args). Invalid names are left out of the
// functions and the TOOLS tuple (Listen refuses them anyway).
func Stub(tools []string) []byte {
	valid := make([]string, 0, len(tools))
	for _, t := range tools {
		if ValidToolName(t) == nil {
			valid = append(valid, t)
		}
	}
	set, _ := normalizeTools(valid) // every name was validated above
	var b strings.Builder
	b.WriteString("# The kernel's tool set and the function name of each tool.\nTOOLS = (")
	for _, t := range set {
		b.WriteString(pyString(t) + ", ")
	}
	b.WriteString(")\nFUNCTIONS = {\n")
	for _, m := range FunctionNames(set) {
		fmt.Fprintf(&b, "    %s: %s,\n", pyString(m[0]), pyString(m[1]))
	}
	b.WriteString("}")
	src := strings.Replace(stubTemplate, stubMarker, b.String(), 1)
	return []byte(strings.Replace(src, maxConnsMarker, strconv.Itoa(DefaultMaxConns), 1))
}

// FunctionNames maps each tool of a sorted set to its stub function name:
// [function, tool] pairs in the set's order.
func FunctionNames(tools []string) [][2]string {
	used := make(map[string]bool, len(tools)+len(reservedIdents))
	for _, r := range reservedIdents {
		used[r] = true
	}
	out := make([][2]string, 0, len(tools))
	for _, t := range tools {
		base := PyIdent(t)
		if used[base] && isReserved(base) {
			base += "_"
		}
		name := base
		for n := 2; used[name]; n++ {
			name = fmt.Sprintf("%s_%d", base, n)
		}
		used[name] = true
		out = append(out, [2]string{name, t})
	}
	return out
}

func isReserved(s string) bool {
	for _, r := range reservedIdents {
		if r == s {
			return true
		}
	}
	return false
}

// PyIdent maps a tool name to a Python identifier: characters other than
// ASCII letters, digits and "_" become "_"; a leading digit or "_" gets a
// "tool_" prefix (names starting with "_" are the module's private ones);
// a keyword or builtin gets a "_" suffix.
func PyIdent(tool string) string {
	var b strings.Builder
	for _, r := range tool {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	id := b.String()
	if id == "" || id[0] == '_' || (id[0] >= '0' && id[0] <= '9') {
		id = "tool_" + id
	}
	if pyKeywords[id] || pyBuiltins[id] {
		id += "_"
	}
	return id
}

// pyString renders s as a Python string literal. JSON string syntax is a
// subset of Python's (Go never emits the one difference, "\/").
func pyString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
