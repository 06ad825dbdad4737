package kernel

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// A frame whose object syntax breaks between its members is a protocol
// error: a wrong byte where ':' or ',' belongs names the member it came
// after, the frame's end there says the object is unterminated.
func TestFrameObjectSyntaxErrors(t *testing.T) {
	cases := []struct{ body, detail string }{
		{`{"id" "1","status":"ok"}`, `frame: expected ':' after member "id"`},
		{`{"id"`, "frame: unterminated object"},
		{`{"id":"1" "status":"ok"}`, `frame: expected ',' or '}' after member "id"`},
		{`{"id":"1","status":"ok"`, "frame: unterminated object"},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			acct := &budget{limit: 1 << 30}
			_, err := decodeFrame(bufio.NewReader(strings.NewReader(c.body)), acct, defaultFrameCaps)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("error %v, want a protocol error saying %q", err, c.detail)
			}
		})
	}
}
