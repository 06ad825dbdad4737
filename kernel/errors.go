package kernel

import (
	"errors"
	"fmt"
	"strconv"
)

// The package's sentinel errors are declared in api.go (the pinned
// contract); this file holds the helpers that wrap them.

// errGroupSurvives: members of a killed process group did not disappear.
var errGroupSurvives = errors.New("members survive SIGKILL")

// protocolErr wraps ErrProtocol with what the kernel did wrong.
func protocolErr(detail string) error {
	return fmt.Errorf("%w: %s", ErrProtocol, detail)
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
