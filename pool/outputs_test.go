package pool

import (
	"strings"
	"testing"
)

// An outputs_dir warning quotes a walk error of up to 512 bytes whole and
// cuts a longer one at 512, marked "...". No walk error on Linux is that
// long (fixed texts, a kernel id, an errno), so the cap is tested here.
func TestCapWarningAt512Bytes(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		in, want string
	}{
		{"", ""},
		{"permission denied", "permission denied"},
		{a(511), a(511)},
		{a(512), a(512)},
		{a(513), a(512) + "..."},
		{a(2000), a(512) + "..."},
	} {
		if got := capWarning(tc.in); got != tc.want {
			t.Errorf("capWarning(%d bytes) = %d bytes %.8q..., want %d bytes", len(tc.in), len(got), got, len(tc.want))
		}
	}
}
