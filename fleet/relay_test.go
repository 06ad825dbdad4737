package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool/api"
)

// chunks is a node's answer body: its pieces, one per Read, then end.
type chunks struct {
	parts []string
	end   error
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, c.end
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

// TestRelayEndsABrokenEventStream: an event stream the node breaks off
// reaches the client as its whole lines and then one error event
// (node_failed), never a cut line; a stream that ends cleanly, and any
// other answer, reach it byte for byte.
func TestRelayEndsABrokenEventStream(t *testing.T) {
	cut := errors.New("unexpected EOF")
	long := `{"event":"display","x":"` + strings.Repeat("a", 40<<10) // over relay's 32 KiB buffer
	const failed = `{"event":"error","error":"node n1 failed mid-answer: unexpected EOF","code":"node_failed"}` + "\n"
	for _, tc := range []struct {
		name, ctype string
		parts       []string
		end         error
		want        string
	}{
		{"cut between lines", "application/x-ndjson", []string{`{"a":1}` + "\n", `{"b":2}` + "\n"}, cut,
			`{"a":1}` + "\n" + `{"b":2}` + "\n" + failed},
		{"cut mid-line", "application/x-ndjson", []string{`{"a":1}` + "\n" + `{"b":`, `2,"c"`}, cut,
			`{"a":1}` + "\n" + failed},
		{"line over the buffer cut", "application/x-ndjson", []string{`{"a":1}` + "\n", long}, cut,
			`{"a":1}` + "\n" + long + "\n" + failed},
		{"line over the buffer ends, the next is cut", "application/x-ndjson", []string{long + `"}` + "\n" + `{"b":`}, cut,
			long + `"}` + "\n" + failed},
		{"line split over reads, clean end", "application/x-ndjson; charset=utf-8", []string{`{"a":`, `1}` + "\n" + `{"b"`, `:2}`}, io.EOF,
			`{"a":1}` + "\n" + `{"b":2}`},
		{"not a stream, cut", "application/json", []string{`{"a":`, `1`}, cut, `{"a":1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {tc.ctype}},
				Body: io.NopCloser(&chunks{parts: tc.parts, end: tc.end})}
			relay(rec, resp, "n1")
			if got := rec.Body.String(); got != tc.want {
				t.Fatalf("relayed %d bytes:\n%.300q\nwant %d bytes:\n%.300q", len(got), got, len(tc.want), tc.want)
			}
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", rec.Code)
			}
		})
	}
}

// TestRelayErrorEventIsAnEvent: the event relay adds decodes as the
// API's error event, so every client reads it as the node's own.
func TestRelayErrorEventIsAnEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/x-ndjson"}},
		Body: io.NopCloser(&chunks{end: io.ErrUnexpectedEOF})}
	relay(rec, resp, "n1")
	var ev api.Event
	if err := json.NewDecoder(bytes.NewReader(rec.Body.Bytes())).Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Event != api.EventError || ev.Code != api.CodeNodeFailed || !strings.Contains(ev.Error, "node n1") {
		t.Fatalf("%+v", ev)
	}
}
