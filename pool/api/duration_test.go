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
		in, want string // want: the duration, or "error"
	}{
		{``, "error"},
		{" \n\t", "error"},
		{`"1.5s"`, "1.5s"},
		{`"2"`, "2s"},
		{`3`, "3s"},
		{`null`, "0s"},
	} {
		var d api.Duration
		err := d.UnmarshalJSON([]byte(tc.in))
		switch {
		case tc.want == "error":
			if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), `"timeout"`) {
				t.Errorf("UnmarshalJSON(%q) = %v, want a bad request naming \"timeout\"", tc.in, err)
			}
		case err != nil || time.Duration(d).String() != tc.want:
			t.Errorf("UnmarshalJSON(%q) = %v, %v; want %s", tc.in, time.Duration(d), err, tc.want)
		}
	}
}
