package kernel

import (
	"strings"
	"testing"
)

// Requests rendered one after another into Exec's kept buffer are each
// whole, with nothing of the one before, and a big request's buffer is
// not kept after it.
func TestRequestEncoderReuse(t *testing.T) {
	var e reqEncoder
	cases := []struct {
		id, code string
		stream   bool
		want     string
	}{
		{"1", "x = '<é>\"\n'", true, `{"id":"1","code":"x = '<é>\"\n'","stream":true}` + "\n"},
		{"2", "y", false, `{"id":"2","code":"y"}` + "\n"},
		{"3", "bad \xff", false, `{"id":"3","code":"bad \ufffd"}` + "\n"},
	}
	for _, c := range cases {
		got, err := e.encode(c.id, c.code, c.stream)
		if err != nil || string(got) != c.want {
			t.Fatalf("request %s: %q, %v; want %q", c.id, got, err, c.want)
		}
		e.release()
	}
	if _, err := e.encode("4", strings.Repeat("a", 1<<20), false); err != nil {
		t.Fatal(err)
	}
	e.release()
	if c := e.buf.Cap(); c >= 1<<20 {
		t.Fatalf("a %d-byte buffer kept after a 1 MiB request", c)
	}
	if got, err := e.encode("5", "z", false); err != nil || string(got) != `{"id":"5","code":"z"}`+"\n" {
		t.Fatalf("after the big request: %q, %v", got, err)
	}
}
