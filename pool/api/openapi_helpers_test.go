package api

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Helpers of openapi_test.go: reading docs/openapi.json's schemas, the Go
// types' JSON fields and the package's constants.

// schemaType is the Go type of a media type's schema (a $ref to a
// component with an x-go-type).
func schemaType(t *testing.T, doc *openAPI, where string, schema map[string]any) reflect.Type {
	t.Helper()
	ref, _ := schema["$ref"].(string)
	comp := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	gt, _ := comp["x-go-type"].(string)
	typ, ok := goTypes[gt]
	if !ok {
		t.Errorf("%s: its schema %q names no known Go type (x-go-type %q)", where, ref, gt)
		return nil
	}
	return typ
}

// schemaProps lists a schema's property names, through $ref, allOf and
// oneOf (a union's fields are its variants' fields).
func schemaProps(doc *openAPI, schema map[string]any) []string {
	set := map[string]bool{}
	var walk func(map[string]any)
	walk = func(s map[string]any) {
		if ref, ok := s["$ref"].(string); ok {
			walk(doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")])
		}
		for name := range asMap(s["properties"]) {
			set[name] = true
		}
		for _, key := range []string{"allOf", "oneOf", "anyOf"} {
			for _, sub := range asSlice(s[key]) {
				walk(asMap(sub))
			}
		}
	}
	walk(schema)
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	return out
}

// jsonFieldsOf lists a struct's JSON field names (embedded structs
// flattened, "-" skipped) and those written even when zero.
func jsonFieldsOf(t reflect.Type) (all, always []string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			a, w := jsonFieldsOf(f.Type)
			all, always = append(all, a...), append(always, w...)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			always = append(always, name)
		}
	}
	return all, always
}

// packageConsts reads the string constants of this package's source
// (not its tests): name to value, "" for a value that is not a literal.
func packageConsts(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					val := ""
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							val, _ = strconv.Unquote(lit.Value)
						}
					}
					out[id.Name] = val
				}
			}
		}
	}
	return out
}

func prop(t *testing.T, doc *openAPI, schema, name string) map[string]any {
	t.Helper()
	p := asMap(asMap(doc.Components.Schemas[schema]["properties"])[name])
	if p == nil {
		t.Fatalf("schema %s has no property %s", schema, name)
	}
	return p
}

func enum(t *testing.T, schema map[string]any) []string {
	t.Helper()
	var out []string
	for _, v := range asSlice(schema["enum"]) {
		out = append(out, v.(string))
	}
	return out
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asSlice(v any) []any        { s, _ := v.([]any); return s }

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
