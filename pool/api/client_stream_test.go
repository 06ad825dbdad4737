//go:build unix

package api_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// A streaming request answered with a plain JSON result (no event
// stream: a daemon or router that does not stream) is decoded as the
// result; a malformed one is a protocol error.
func TestExecuteStreamTakesAPlainAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // output; "" expects ErrProtocol
	}{
		{"result", `{"status":"success","output":"plain\n"}`, "plain\n"},
		{"malformed", `{"status":`, ""},
	} {
		var cc connCounter
		c := fakeDaemon(t, &cc, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, tc.body)
		})
		res, err := c.ExecuteStream(testCtx(t), pool.Request{Code: "1"}, nil)
		switch {
		case tc.want == "" && (res != nil || !errors.Is(err, api.ErrProtocol)):
			t.Errorf("%s: %+v, %v; want a protocol error", tc.name, res, err)
		case tc.want != "" && (err != nil || res == nil || res.Status != pool.StatusSuccess || res.Output != tc.want):
			t.Errorf("%s: %+v, %v; want a success printing %q", tc.name, res, err, tc.want)
		}
	}
}
