package kernel

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A namespace of exactly MaxVariables (1000) names lists them all, and one
// with a name more lists the first 1000 in sorted order of 1001: the
// listing at its bound is no protocol error.
func TestVariablesAtMaxVariables(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	for _, c := range []struct{ names, total int }{{1000, 1000}, {1001, 1001}} {
		mustExec(t, k, fmt.Sprintf("globals().update(('v%%04d' %% j, j) for j in range(%d))", c.names))
		v, err := k.Variables(context.Background())
		if err != nil {
			t.Fatalf("%d names: %v", c.names, err)
		}
		if len(v.Variables) != 1000 || v.Total != c.total {
			t.Fatalf("%d names: listed %d of %d, want 1000 of %d", c.names, len(v.Variables), v.Total, c.total)
		}
		if first, last := v.Variables[0], v.Variables[999]; first.Name != "v0000" || last.Name != "v0999" || last.Repr != "999" {
			t.Fatalf("%d names: first %+v, last %+v", c.names, first, last)
		}
	}
}

// Names and types are the tenant's to choose (globals() takes any string,
// __qualname__ any text), so the daemon cuts them to 256 bytes on a
// character boundary: one of exactly 256 bytes is kept, one of 257 whose
// last character straddles the cut loses that character. A repr of 200
// four-byte characters (the runner's bound) is exactly the 800 bytes kept.
func TestVariablesFieldsClippedAtTheirBounds(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "globals()['m' * 256] = 1\n"+
		"globals()['n' * 255 + '\\u00e9'] = 2\n"+ // é: bytes 256 and 257
		"class T:\n    def __repr__(self):\n        return '\\U0001d11e' * 200\n"+
		"T.__module__ = 'builtins'\n"+
		"T.__qualname__ = 't' * 254 + '\\u20ac'\n"+ // €: bytes 255 to 257
		"obj = T()\n"+
		"class U: pass\n"+
		"U.__module__ = 'builtins'\n"+
		"U.__qualname__ = 'u' * 256\n"+
		"other = U()\n"+
		"del T, U")
	v, err := k.Variables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Variable{}
	for _, e := range v.Variables {
		got[e.Name] = e
	}
	m, n := strings.Repeat("m", 256), strings.Repeat("n", 255)
	if len(got) != 4 || v.Total != 4 || got[m].Repr != "1" || got[n].Repr != "2" {
		t.Fatalf("names %q, want %d m's and %d n's (the é cut), obj and other", keysOf(got), len(m), len(n))
	}
	if typ := got["obj"].Type; typ != strings.Repeat("t", 254) {
		t.Errorf("obj's type %d bytes %.20q..., want 254 t's (the € cut)", len(typ), typ)
	}
	if typ := got["other"].Type; typ != strings.Repeat("u", 256) {
		t.Errorf("other's type %d bytes, want 256 u's", len(typ))
	}
	if r := got["obj"].Repr; r != strings.Repeat("\U0001d11e", 200) {
		t.Errorf("obj's repr %d bytes, want the 800 of 200 four-byte characters", len(r))
	}
}

func keysOf(m map[string]Variable) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
