package testenv

import (
	"runtime"
	"strings"
)

// Goroutines returns the trace of every goroutine (runtime.Stack's, one
// element each: a header such as "goroutine 7 [IO wait]:", the frames, the
// "created by" line). Tests read them to check where a goroutine waits: an
// event of both the right and a wrong path, whose state says which.
func Goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) { // else truncated: a goroutine could be missing
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
