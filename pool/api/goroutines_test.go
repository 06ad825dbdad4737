package api_test

import (
	"strings"

	"github.com/kernpool/kernpool/internal/testenv"
)

// readingWithNoCallbackPending reports whether a goroutine that the test
// function creator started is parked reading from the network ([IO wait])
// while no context.AfterFunc callback of a client round trip is pending
// (started by the cancel, not yet returned). A canceled request's callback
// closes its connection, which wakes that reader as it returns: a reader
// still parked after every callback returned was left its connection.
func readingWithNoCallbackPending(creator string) bool {
	reading := false
	for _, g := range testenv.Goroutines() {
		switch {
		case strings.Contains(g, "created by context.(*afterFuncCtx).cancel") &&
			strings.Contains(g, "pool/api.(*connKeeper).RoundTrip"):
			return false
		case strings.Contains(g, "[IO wait") &&
			strings.Contains(g, "created by github.com/kernpool/kernpool/pool/api_test."+creator+" "):
			reading = true
		}
	}
	return reading
}
