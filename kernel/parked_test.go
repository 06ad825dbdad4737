package kernel

import (
	"strings"

	"github.com/kernpool/kernpool/internal/testenv"
)

// goroutineIn reports whether a goroutine that the test function creator
// started (its trace's "created by" line) has fn on its stack: a test waits
// for that, an event of both a right and a wrong path, then checks which
// path was taken instead of waiting out an event that never comes.
func goroutineIn(creator, fn string) bool {
	for _, g := range testenv.Goroutines() {
		if strings.Contains(g, fn+"(") && strings.Contains(g, "created by github.com/kernpool/kernpool/kernel."+creator+" ") {
			return true
		}
	}
	return false
}
