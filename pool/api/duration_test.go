package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

// Duration.UnmarshalJSON called directly (it is exported) with no value
// at all is a bad request naming what it wants, not a panic; a string
// and a number still parse.
func TestDurationUnmarshalEdges(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: the duration, "error", or "error: range"
	}{
		{``, "error"},
		{" \n\t", "error"},
		{`"1.5s"`, "1.5s"},
		{`"2"`, "2s"},
		{`3`, "3s"},
		{`null`, "0s"},
		{`9223372032`, "2562047h47m12s"},          // in range, exact in a float64
		{`"9223372032"`, "2562047h47m12s"},        // the same as a string
		{`9223372036.854775807`, "error: range"},  // 2^63 ns: one past the largest
		{`-9223372036.854775807`, "error: range"}, // its negative
		{`1e10`, "error: range"},                  // past it
		{`"1e10"`, "error: range"},                // past it, as a string
	} {
		var d api.Duration
		err := d.UnmarshalJSON([]byte(tc.in))
		switch {
		case tc.want == "error":
			if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), `"timeout"`) {
				t.Errorf("UnmarshalJSON(%q) = %v, want a bad request naming \"timeout\"", tc.in, err)
			}
		case tc.want == "error: range": // refused as no duration, not as a negative one (an overflow)
			if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "expected a duration") {
				t.Errorf("UnmarshalJSON(%q) = %v, want a bad request: no duration it can hold", tc.in, err)
			}
		case err != nil || time.Duration(d).String() != tc.want:
			t.Errorf("UnmarshalJSON(%q) = %v, %v; want %s", tc.in, time.Duration(d), err, tc.want)
		}
	}
}
