//go:build unix

package main

import (
	"regexp"
	"strings"

	"github.com/kernpool/kernpool/internal/testenv"
)

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) \[([^\]]*)\]`)

// pipeWait says how a goroutine that the test function creator started
// waits in os/exec's Cmd.Wait for the command's pipe readers:
// "bounded" (in a select: the WaitDelay timer can end it), "unbounded" (a
// bare receive while a reader still blocks in its read: nothing ends it but
// the pipe's end), or "" (neither, or not yet). The two are told apart by
// goroutine states, not by how long the wait takes: after WaitDelay's timer
// the wait is a bare receive too, but only once the pipes were closed,
// which wakes every reader at once.
func pipeWait(creator string) string {
	traces := testenv.Goroutines()
	for _, g := range traces {
		m := goroutineHeader.FindStringSubmatch(g)
		if m == nil || !strings.Contains(g, "os/exec.(*Cmd).awaitGoroutines(") ||
			!strings.Contains(g, "created by github.com/kernpool/kernpool/cmd/kernpool."+creator) {
			continue
		}
		if strings.HasPrefix(m[2], "select") {
			return "bounded"
		}
		if !strings.HasPrefix(m[2], "chan receive") {
			return ""
		}
		for _, r := range traces {
			h := goroutineHeader.FindStringSubmatch(r)
			if h != nil && strings.HasPrefix(h[2], "IO wait") && strings.Contains(r, "created by os/exec.(*Cmd).Start in goroutine "+m[1]+"\n") {
				return "unbounded"
			}
		}
	}
	return ""
}
