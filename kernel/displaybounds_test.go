//go:build unix

package kernel

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// displayBundle is a cell whose value is a display with text/plain plus
// extra data mime types, meta metadata keys, and one data mime type of
// mimeLen bytes among the extras (0: none).
func displayBundle(extra, meta, mimeLen int) string {
	return fmt.Sprintf("class D:\n"+
		"    def _repr_mimebundle_(self, include=None, exclude=None):\n"+
		"        data = {'text/plain': 'p'}\n"+
		"        data.update(('text/x-%%02d' %% i, 'v') for i in range(%d))\n"+
		"        if %d:\n"+
		"            data['text/x-' + 'm' * (%d - 7)] = 'long'\n"+
		"        return data, {'k%%02d' %% i: {} for i in range(%d)}\n"+
		"D()", extra, mimeLen, mimeLen, meta)
}

// A display may carry up to 32 mime types (and 32 metadata keys), each
// type up to 128 bytes: at those bounds it is delivered, one past any of
// them is a protocol error that ends the kernel (the runner does not
// bound a _repr_mimebundle_, the daemon does).
func TestDisplayShapeBounds(t *testing.T) {
	t.Run("at the bounds", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), "")
		rep := mustExec(t, k, displayBundle(30, 32, 128)) // 1 + 30 + 1 mime types
		if len(rep.Displays) != 1 {
			t.Fatalf("%d displays, want 1", len(rep.Displays))
		}
		d := rep.Displays[0]
		long := "text/x-" + strings.Repeat("m", 121)
		if len(d.Data) != 32 || len(d.Metadata) != 32 || string(d.Data[long]) != `"long"` || string(d.Data["text/x-29"]) != `"v"` {
			t.Fatalf("display of %d mime types, %d metadata keys: %v", len(d.Data), len(d.Metadata), keysOfRaw(d.Data))
		}
		mustExec(t, k, "1") // still in sync
	})
	for _, c := range []struct {
		name                 string
		extra, meta, mimeLen int
	}{
		{"33 mime types", 32, 0, 0},
		{"33 metadata keys", 1, 33, 0},
		{"a mime type of 129 bytes", 1, 0, 129},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := startKernel(t, baseSpec(t), "")
			execErr(t, k, context.Background(), displayBundle(c.extra, c.meta, c.mimeLen), ErrProtocol)
		})
	}
}

func keysOfRaw[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
