package kernel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// scanAll runs a scanner over input delivered by r and collects raw output
// and headers (a header n is followed by an n-byte body, as on stdout).
func scanAll(t *testing.T, r io.Reader, marker string) (raw string, bodies []string, err error) {
	t.Helper()
	var epoch atomic.Uint64
	var out bytes.Buffer
	s := newScanner(r, []byte(marker), " ", &epoch)
	err = s.run(func(p []byte, _ uint64) { out.Write(p) }, func(_ byte, n int64) error {
		if n > 1<<20 {
			return protocolErr("too big")
		}
		b, err := io.ReadAll(s.body(n))
		if err != nil {
			return err
		}
		bodies = append(bodies, string(b))
		return nil
	})
	return out.String(), bodies, err
}

func TestScannerSplitsFramesAndRaw(t *testing.T) {
	const m = "\n@@S@@ "
	cases := []struct {
		name, in, raw string
		bodies        []string
		wantErr       error
	}{
		{"frame only", m + "2\n{}", "", []string{"{}"}, io.EOF},
		{"raw around frames", "a" + m + "2\n{}b\nc" + m + "1\nxd", "ab\ncd", []string{"{}", "x"}, io.EOF},
		{"non-number is raw", "a" + m + "xy\nb", "a" + m + "xy\nb", nil, io.EOF},
		{"digits then junk is raw", m + "12x\n", m + "12x\n", nil, io.EOF},
		{"empty header is raw", m + "\n", m + "\n", nil, io.EOF},
		{"newline tail at EOF", "a\n", "a\n", nil, io.EOF},
		{"marker prefix at EOF", "a\n@@S", "a\n@@S", nil, io.EOF},
		{"marker within marker", "\n@@S\n@@S@@ 1\nz", "\n@@S", []string{"z"}, io.EOF},
		{"header too long", m + "12345678901234567890\n", "", nil, ErrProtocol},
		{"oversize", m + "99999999\n", "", nil, ErrProtocol},
		{"truncated body", m + "5\nab", "", nil, io.ErrUnexpectedEOF},
		{"empty body", m + "0\n", "", []string{""}, io.EOF},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"bytewise": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"halves":   func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		// io.EOF comes with the last byte (a frame's body may end there).
		"bytewise, EOF with data": func(s string) io.Reader { return iotest.DataErrReader(iotest.OneByteReader(strings.NewReader(s))) },
	}
	for _, c := range cases {
		for rname, mk := range readers {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				raw, bodies, err := scanAll(t, mk(c.in), m)
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("error %v, want %v", err, c.wantErr)
				}
				if raw != c.raw || strings.Join(bodies, "|") != strings.Join(c.bodies, "|") {
					t.Fatalf("raw %q bodies %q; want %q %q", raw, bodies, c.raw, c.bodies)
				}
			})
		}
	}
}

func TestScannerLargeBody(t *testing.T) {
	body := strings.Repeat("x", 3*scanBufSize+17)
	in := "pre" + "\n@@S@@ " + itoa(len(body)) + "\n" + body + "post"
	raw, bodies, err := scanAll(t, iotest.HalfReader(strings.NewReader(in)), "\n@@S@@ ")
	if !errors.Is(err, io.EOF) || raw != "prepost" || len(bodies) != 1 || bodies[0] != body {
		t.Fatalf("err %v raw %q bodies %d", err, raw, len(bodies))
	}
}

func TestDecodeReply(t *testing.T) {
	cases := []struct {
		body string
		ok   bool
	}{
		{`{"id":"1","status":"ok"}`, true},
		{` {"id":"1","status":"exit","exit_code":3}`, true},
		{`[1]`, false},
		{`null`, false},
		{`"s"`, false},
		{`{"id":"1","status":"weird"}`, false},
		{`{"id":1,"status":"ok"}`, false},
		{`{"id":"1",`, false},
		// A number token of maxNumberLen (32) characters is read, a longer one
		// refused: here in a member the decoder skips.
		{`{"id":"1","status":"ok","extra":1.` + strings.Repeat("0", 30) + `}`, true},
		{`{"id":"1","status":"ok","extra":1.` + strings.Repeat("0", 31) + `}`, false},
		{`{"id":"1","status":"ok","extra":1.` + strings.Repeat("0", 32) + `}`, false},
		// Digits and letters at the ends of a token's ranges.
		{`{"id":"1","status":"ok","exit_code":9,"stdout_clipped":false}`, true},
		// Integers: 0 and -0, but no leading zero.
		{`{"id":"1","status":"ok","exit_code":0}`, true},
		{`{"id":"1","status":"ok","exit_code":-0}`, true},
		{`{"id":"1","status":"ok","exit_code":01}`, false},
		{`{"id":"1","status":"ok","exit_code":-01}`, false},
		// Unknown members, before a known one and several: skipped, never
		// taken for a repeat; a known member twice is refused.
		{`{"id":"1","extra":1,"status":"ok"}`, true},
		{`{"id":"1","status":"ok","a":1,"b":2}`, true},
		{`{"id":"1","id":"2","status":"ok"}`, false},
		// An unknown member's scalar: a string or a JSON number, true, false
		// or null; nothing else.
		{`{"id":"1","status":"ok","note":"hi","n":null,"t":true,"f":false,"x":-1.5e3}`, true},
		{`{"id":"1","status":"ok","extra":tru}`, false},
		{`{"id":"1","status":"ok","extra":+1}`, false},
		{`{"id":"1","status":"ok","extra":.5}`, false},
		{`{"id":"1","status":"ok","extra":}`, false},
		{`{"id":"1","status":"ok","stdout_clipped":nope}`, false},
		// A member name may have smallFieldBytes (64) bytes, not more.
		{`{"id":"1","status":"ok","` + strings.Repeat("n", 64) + `":1}`, true},
		{`{"id":"1","status":"ok","` + strings.Repeat("n", 65) + `":1}`, false},
	}
	for _, c := range cases {
		_, err := decodeReply([]byte(c.body))
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrProtocol)) {
			t.Errorf("%s: error %v, want ok=%v", c.body, err, c.ok)
		}
	}
}

func TestRing(t *testing.T) {
	r := ring{buf: make([]byte, 8)}
	r.write([]byte("abc"))
	if r.String() != "abc" {
		t.Fatal(r.String())
	}
	r.write([]byte("defgh"))
	if r.String() != "abcdefgh" {
		t.Fatal(r.String())
	}
	r.write([]byte("ij"))
	if r.String() != "cdefghij" {
		t.Fatal(r.String())
	}
	r.write([]byte("0123456789"))
	if r.String() != "23456789" {
		t.Fatal(r.String())
	}
}

// FuzzDecodeReply checks the single-pass decoder against encoding/json:
// whenever both accept a body, they must agree on every field.
func FuzzDecodeReply(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","status":"ok","stdout":"a\nb\"c\\d\u00e9\ud83d\ude00","stderr":"","stdout_clipped":false,"stdout_len":2,"stderr_clipped":true,"traceback":"","exit_code":-3,"execution_count":7,"stderr_closed":false}`,
		`{"id":"x","status":"exit","extra":1.5e3,"other":null,"s":"\ud800x"}`,
		` { "status" : "error" , "id" : "" } `,
		`{"id":"1","status":"ok","stdout":"\/\b\f\r\t"}`,
	} {
		f.Add([]byte(seed))
	}
	// Upper-case and non-ASCII member names and values are compared too.
	f.Add([]byte(`{"id":"Ä","status":"ok","Status":"error","stdout":"Ünïcødé ✓","STDOUT":"x"}`))
	f.Add([]byte(`{"id":"1","status":"ok","STDOUT":"only in upper case"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		acct := &budget{limit: 1 << 40}
		got, err := decodeFrame(bufio.NewReader(bytes.NewReader(body)), acct, defaultFrameCaps)
		// The decoder holds no more than what arrived: at most twice the
		// body (a buffer's doubling, or invalid UTF-8 replaced) plus the
		// small minimum of each member's buffer.
		if bound := 2*int64(len(body)) + 16*512; acct.peak.Load() > bound {
			t.Fatalf("decoder held %d bytes for a %d-byte body (bound %d)", acct.peak.Load(), len(body), bound)
		}
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		if !utf8.Valid(body) || bytes.ContainsAny(body, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f") {
			return // encoding/json is stricter or replaces differently here
		}
		want, ok := referenceReply(body)
		if !ok {
			return
		}
		if *got != want {
			t.Fatalf("decoders disagree on %q:\n got %+v\nwant %+v", body, *got, want)
		}
	})
}

// referenceReply decodes body with encoding/json, matching member names
// exactly as the runner writes them: decoding into a struct would also
// match "Status" or "ſtatus" to "status" (case folding), so the members go
// into a map (exact keys, the last duplicate wins) and each field is
// decoded from its own member.
func referenceReply(body []byte) (wireReply, bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return wireReply{}, false
	}
	var want wireReply
	v := reflect.ValueOf(&want).Elem()
	for i := range v.NumField() {
		raw, ok := members[v.Type().Field(i).Tag.Get("json")]
		if !ok {
			continue
		}
		if json.Unmarshal(raw, v.Field(i).Addr().Interface()) != nil {
			return wireReply{}, false
		}
	}
	return want, true
}

// A header may claim any length up to the frame limit: nothing of that
// size is allocated before the bytes arrive, and a body that ends early is
// a read error (the kernel died), not a decoded reply.
func TestClaimedLengthNotAllocated(t *testing.T) {
	const claim = DefaultMaxFrameBytes
	in := "\n@@S@@ " + itoa(claim) + "\n" + `{"id":"1","status":"ok","stdout":"abc`
	var epoch atomic.Uint64
	s := newScanner(strings.NewReader(in), []byte("\n@@S@@ "), " ", &epoch)
	acct := &budget{limit: 1 << 30}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := s.run(func([]byte, uint64) {}, func(_ byte, n int64) error {
		_, err := decodeFrame(s.body(n), acct, defaultFrameCaps)
		return err
	})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrProtocol) {
		t.Fatalf("error %v, want an unexpected EOF that is no protocol error", err)
	}
	if acct.peak.Load() > 4096 {
		t.Fatalf("decoder charged %d bytes for a %d-byte claim with 40 bytes of body", acct.peak.Load(), claim)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("%d bytes allocated for a %d-byte claim", got, claim)
	}
}

// Per-member caps and the budget: an over-long member and a frame that
// repeats a large member are protocol errors, refused as the bytes arrive.
func TestFrameMemberCapsAndBudget(t *testing.T) {
	big := strings.Repeat("x", CaptureChars/2+1)
	cases := []struct {
		name, body, detail string
		limit              int64
	}{
		{"id over its cap", `{"id":"` + strings.Repeat("1", 65) + `","status":"ok"}`, `"id" exceeds its cap of 64 bytes`, 1 << 30},
		{"stdout over its cap", `{"id":"1","status":"ok","stdout":"` + big + big + `"}`, `"stdout" exceeds its cap of 1000000 bytes`, 1 << 30},
		{"repeated member", `{"id":"1","status":"ok","stdout":"x","stdout":"` + big + `"}`, `frame repeats member "stdout"`, 1 << 30},
		{"members over the budget", `{"id":"1","status":"ok","stdout":"` + big + `","stderr":"` + big + `"}`, "memory budget", 800_000},
		{"over-long number", `{"id":"1","status":"ok","exit_code":` + strings.Repeat("9", 40) + `}`, "over-long value", 1 << 30},
		{"over-long boolean", `{"id":"1","status":"ok","stdout_clipped":true` + strings.Repeat("e", 40) + `}`, `member "stdout_clipped" has an over-long value`, 1 << 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acct := &budget{limit: c.limit}
			_, err := decodeFrame(bufio.NewReader(strings.NewReader(c.body)), acct, defaultFrameCaps)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("error %v, want a protocol error saying %q", err, c.detail)
			}
			if acct.peak.Load() > c.limit {
				t.Fatalf("peak %d over the budget %d", acct.peak.Load(), c.limit)
			}
		})
	}
}

// parseHeader against headers written out by hand: the kinds at both ends
// of the letter range, a kind letter followed by no space, and 19 digits
// (the most a header may have) after a kind letter and without one.
func TestParseHeaderKindsAndDigits(t *testing.T) {
	const nineteen = "1234567890123456789"
	cases := []struct {
		in, kinds string
		kind      byte
		n         int64
		size      int
		status    int
	}{
		{"A 7\n", "A", 'A', 7, 4, headerOK},
		{"Z 7\n", "Z", 'Z', 7, 4, headerOK},
		{"C 123\nrest", " BC", 'C', 123, 6, headerOK},
		{"9\n", " B", 0, 9, 2, headerOK},
		{"B " + nineteen + "\n", "B", 'B', 1234567890123456789, 22, headerOK},
		{nineteen + "\n", " ", 0, 1234567890123456789, 20, headerOK},
		{"B " + nineteen + "0\n", "B", 0, 0, 0, headerTooLong},
		{nineteen + "0\n", " ", 0, 0, 0, headerTooLong},
		{"Cx", "C", 0, 0, 0, headerNone},
		{"Cx 1\n", "C", 0, 0, 0, headerNone},
		{"A 7\n", " B", 0, 0, 0, headerNone},
		{"7\n", "B", 0, 0, 0, headerNone},
		{"\n", " ", 0, 0, 0, headerNone},
		{"12x\n", " ", 0, 0, 0, headerNone},
		{"", " ", 0, 0, 0, headerIncomplete},
		{"C", "C", 0, 0, 0, headerIncomplete},
		{"C ", "C", 0, 0, 0, headerIncomplete},
		{"C 12", "C", 0, 0, 0, headerIncomplete},
		{"12", " ", 0, 0, 0, headerIncomplete},
	}
	for _, c := range cases {
		kind, n, size, st := parseHeader([]byte(c.in), c.kinds)
		if kind != c.kind || n != c.n || size != c.size || st != c.status {
			t.Errorf("parseHeader(%q, %q) = %q %d %d status %d; want %q %d %d status %d",
				c.in, c.kinds, kind, n, size, st, c.kind, c.n, c.size, c.status)
		}
	}
}

// epochReader hands out one chunk per Read and moves the epoch first, as
// if a cell had begun between the two reads.
type epochReader struct {
	chunks []string
	epochs []uint64
	epoch  *atomic.Uint64
}

func (r *epochReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	r.epoch.Store(r.epochs[0])
	n := copy(p, r.chunks[0])
	r.chunks, r.epochs = r.chunks[1:], r.epochs[1:]
	return n, nil
}

// Bytes held back as a possible marker start keep the epoch they were read
// in when a later read shows they are output: they belong to the cell that
// wrote them, not to the one running when the next bytes came.
func TestScannerHeldBytesKeepTheirEpoch(t *testing.T) {
	var epoch atomic.Uint64
	r := &epochReader{chunks: []string{"ab\n@@S", "x"}, epochs: []uint64{1, 2}, epoch: &epoch}
	s := newScanner(r, []byte("\n@@S@@ "), " ", &epoch)
	var got []string
	err := s.run(func(p []byte, e uint64) { got = append(got, fmt.Sprintf("%d:%s", e, p)) },
		func(byte, int64) error { return errors.New("no header expected") })
	want := []string{"1:ab", "1:\n@@S", "2:x"}
	if !errors.Is(err, io.EOF) || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("raw %q, error %v; want %q and EOF", got, err, want)
	}
}

// Decoded strings, escapes at the string's start and end and near the
// frame's end included, against the values written out by hand.
func TestDecodeReplyStrings(t *testing.T) {
	cases := []struct{ json, want string }{
		{`""`, ""},
		{`"\"q\" and a long enough rest"`, `"q" and a long enough rest`},
		{`"line\n"`, "line\n"},
		{`"\\"`, `\`},
		{`"\t\t\t\t\t\t\t\t"`, "\t\t\t\t\t\t\t\t"},
		{`"é \u00e9 \ud83d\ude00 /\/"`, "é é 😀 //"},
		{`"x\ud83d\ude00"`, "x😀"},
	}
	for _, c := range cases {
		for _, body := range []string{`{"id":"1","status":"ok","stdout":` + c.json + `}`, `{"id":"1","stdout":` + c.json + `,"status":"ok"}`} {
			rep, err := decodeReply([]byte(body))
			if err != nil {
				t.Errorf("%s: %v", body, err)
			} else if rep.Stdout != c.want {
				t.Errorf("%s: stdout %q, want %q", body, rep.Stdout, c.want)
			}
		}
	}
}

// An escape that crosses the end of the reader's buffer (4096 bytes for
// decodeReply) decodes as one anywhere else does: a surrogate pair placed
// at each offset around that end.
func TestDecodeReplyEscapeAcrossTheBuffer(t *testing.T) {
	const head = `{"id":"1","status":"ok","stdout":"`
	for at := 4080; at <= 4100; at++ {
		pad := strings.Repeat("a", at-len(head))
		rep, err := decodeReply([]byte(head + pad + `\ud83d\ude00z"}`))
		if err != nil {
			t.Fatalf("escape at byte %d: %v", at, err)
		}
		if rep.Stdout != pad+"😀z" {
			t.Fatalf("escape at byte %d: stdout ends %q", at, rep.Stdout[max(len(rep.Stdout)-8, 0):])
		}
	}
}
