package envscrub

import (
	"strings"
	"testing"
)

// TestExactMaskAtEveryOffset: the sampled scan finds the shortest secret
// at every offset of texts of every length up to 24 bytes past it, the
// text's last gram included, whatever order the secrets came in (the
// sampling step follows the shortest one, not the first or the last).
func TestExactMaskAtEveryOffset(t *testing.T) {
	const short, long = "Zq8#vK2m", "Long-secret-0123" // 8 and 16 bytes: steps 5 and 13
	for _, order := range [][]string{{long, short}, {short, long}} {
		e := newExactSet(order)
		for pre := range 25 {
			for post := range 3 {
				in := strings.Repeat("x", pre) + short + strings.Repeat("y", post)
				want := strings.Repeat("x", pre) + "***" + strings.Repeat("y", post)
				if got := e.mask(in); got != want {
					t.Fatalf("secrets %q: mask(%q) = %q, want %q", order, in, got, want)
				}
			}
		}
	}
}
