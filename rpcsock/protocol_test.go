package rpcsock

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestWireRefusals sends every kind of bad request on ONE connection and
// checks the exact error text; a good call afterwards proves the connection
// and the kernel's budget are intact (refusals consume nothing).
func TestWireRefusals(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			if network == "unix" {
				requireUnixSockets(t)
			}
			s := listen(t, Config{Tools: []string{"web_search", "read_file"}, Network: network, MaxLineBytes: 1024})
			h := &echo{}
			end := s.BeginCell(h, 1)
			cl := newClient(t, s)
			tok := s.Token()
			cases := []struct {
				name, line, want string
			}{
				{"not json", `{"tool": `, "Invalid RPC request: unexpected end of JSON input"},
				{"garbage", `hello`, "Invalid RPC request: invalid character 'h' looking for beginning of value"},
				{"array", `[1,2]`, "Invalid RPC request: not a JSON object"},
				{"trailing junk", `{"tool":"x"} y`, "Invalid RPC request: invalid character 'y' after top-level value"},
				{"bad utf8", "{\"tool\":\"\xff\"}", "Invalid RPC request: not valid UTF-8"},
				{"too long", `{"tool":"` + strings.Repeat("a", 2000) + `"}`, "Invalid RPC request: line too long"},
				{"no token", `{"tool":"web_search","args":{}}`, "Unauthorized RPC request"},
				{"wrong token", req("web_search", nil, tok+"x"), "Unauthorized RPC request"},
				{"empty token", req("web_search", nil, ""), "Unauthorized RPC request"},
				{"token not string", `{"tool":"web_search","token":1}`, "Unauthorized RPC request"},
				{"bad token before unknown tool", req("nope", nil, "bad"), "Unauthorized RPC request"},
				{"tool not string", `{"tool":5,"token":"` + tok + `"}`, "Invalid RPC request: tool must be a string"},
				{"args not object", `{"tool":"web_search","args":[1],"token":"` + tok + `"}`, "Invalid RPC request: args must be a JSON object"},
				{"unknown tool", req("terminal", nil, tok), "Tool 'terminal' is not available in this kernel. Available: read_file, web_search"},
				{"good", req("web_search", map[string]int{"q": 1}, tok), ""},
				{"budget", req("web_search", nil, tok), "Tool call limit reached (1)"},
				{"unknown tool after budget", req("x", nil, tok), "Tool 'x' is not available in this kernel. Available: read_file, web_search"},
			}
			for _, tc := range cases {
				got := cl.send(t, tc.line)
				if tc.want == "" {
					if got["result"] != `web_search:{"q":1}` || got["error"] != "" {
						t.Fatalf("%s: got %v", tc.name, got)
					}
					continue
				}
				if got["error"] != tc.want {
					t.Errorf("%s: error = %q, want %q", tc.name, got["error"], tc.want)
				}
			}
			if n := end(); n != 1 {
				t.Errorf("callsMade = %d, want 1 (refusals must not count)", n)
			}
			if got := cl.send(t, req("web_search", nil, tok)); got["error"] != MsgNoActiveCell {
				t.Errorf("after end: %v, want %q", got, MsgNoActiveCell)
			}
			if h.calls.Load() != 1 {
				t.Errorf("handler calls = %d, want 1", h.calls.Load())
			}
		})
	}
}

// TestTokenFirstOverTCP: on TCP the token is the only guard, so a request
// with a bad token learns nothing else (neither the tool set nor whether a
// cell runs).
func TestTokenFirstOverTCP(t *testing.T) {
	s := listen(t, Config{Tools: []string{"a"}, Network: "tcp"})
	if !strings.HasPrefix(s.Endpoint(), "tcp://127.0.0.1:") {
		t.Fatalf("endpoint %q", s.Endpoint())
	}
	cl := newClient(t, s)
	for _, line := range []string{req("a", nil, "x"), req("zzz", nil, "x"), `{"tool":7,"args":1}`} {
		if got := cl.send(t, line); got["error"] != MsgUnauthorized {
			t.Errorf("%s: %v", line, got)
		}
	}
}

func TestBlankLinesAreSkipped(t *testing.T) {
	s := listen(t, Config{Tools: []string{"a"}, Network: "tcp"})
	end := s.BeginCell(&echo{}, 0)
	defer end()
	cl := newClient(t, s)
	if _, err := cl.c.Write([]byte("\n  \r\n")); err != nil {
		t.Fatal(err)
	}
	if got := cl.send(t, req("a", nil, s.Token())); got["result"] != "a:{}" {
		t.Fatalf("got %v", got)
	}
}

func TestParseRequestArgs(t *testing.T) {
	tests := []struct {
		line, wantArgs string
	}{
		{`{"tool":"a","token":"t"}`, `{}`},
		{`{"tool":"a","args":null,"token":"t"}`, `{}`},
		{`{"tool":"a","args": {"x": [1]} ,"token":"t"}`, `{"x":[1]}`},
	}
	for _, tc := range tests {
		r, refusal := parseRequest([]byte(tc.line), "t")
		if refusal != "" || string(r.args) != tc.wantArgs || r.tool != "a" {
			t.Errorf("%s: %+v %q", tc.line, r, refusal)
		}
	}
	if _, refusal := parseRequest([]byte(`{"tool":"a","token":""}`), ""); refusal != MsgUnauthorized {
		t.Errorf("empty server token must fail closed, got %q", refusal)
	}
}

func TestMessages(t *testing.T) {
	if got := UnknownToolMessage("x", nil); got != "Tool 'x' is not available in this kernel. Available: (none)" {
		t.Error(got)
	}
	if got := LimitMessage(50); got != "Tool call limit reached (50)" {
		t.Error(got)
	}
}

func TestReadLineLimits(t *testing.T) {
	const limit = 40
	tests := []struct {
		name, in    string
		want        []string // "" entries mark a too-long line
		wantLongs   int
		wantPartial bool
	}{
		{"exact limit", strings.Repeat("a", limit) + "\n", []string{strings.Repeat("a", limit)}, 0, false},
		{"one over", strings.Repeat("a", limit+1) + "\nok\n", []string{"", "ok"}, 1, false},
		{"far over then ok", strings.Repeat("b", 500) + "\nok\n", []string{"", "ok"}, 1, false},
		{"unterminated", "ok\nhalf", []string{"ok"}, 0, true},
	}
	for _, tc := range tests {
		r := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		mem := &memBudget{limit: limit + 1}
		var got []string
		longs := 0
		for {
			line, tooLong, partial, err := readLine(r, limit, mem)
			if err != nil {
				if partial != tc.wantPartial {
					t.Errorf("%s: partial = %v", tc.name, partial)
				}
				break
			}
			if tooLong {
				longs++
			}
			got = append(got, string(line))
			mem.release(cap(line))
		}
		if held := mem.held.Load(); held != 0 {
			t.Errorf("%s: %d bytes still charged after every line was released", tc.name, held)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || longs != tc.wantLongs {
			t.Errorf("%s: got %q (%d long), want %q (%d)", tc.name, got, longs, tc.want, tc.wantLongs)
		}
	}
}

// Two connections' half lines share one budget: the line that would pass
// it fails with errOverBudget and leaves nothing charged for itself.
func TestReadLineSharedBudget(t *testing.T) {
	mem := &memBudget{limit: 1000}
	a := bufio.NewReaderSize(strings.NewReader(strings.Repeat("a", 700)), 16)
	if _, _, _, err := readLine(a, 900, mem); err == nil || errors.Is(err, errOverBudget) {
		t.Fatalf("first half line: %v, want EOF", err)
	}
	// The first reader's line was released at EOF; hold 700 bytes as a live line would.
	if !mem.charge(700) {
		t.Fatal("charge refused")
	}
	b := bufio.NewReaderSize(strings.NewReader(strings.Repeat("b", 800)+"\n"), 16)
	if _, _, _, err := readLine(b, 900, mem); !errors.Is(err, errOverBudget) {
		t.Fatalf("second line: %v, want errOverBudget", err)
	}
	if held := mem.held.Load(); held != 700 {
		t.Fatalf("held = %d after the refused line, want 700", held)
	}
}

// FuzzReadLine checks readLine against a reference split on '\n': every
// complete line comes back whole or as tooLong, the unterminated rest is
// an error with partial set, and the budget never holds more than one
// line's cap (limit+1) nor anything once each line was released.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("ok\nhalf"), uint8(8))
	f.Add([]byte(strings.Repeat("x", 100)+"\n\nabc\n"), uint8(40))
	f.Add([]byte("\n\n\n"), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, lim uint8) {
		limit := int(lim)
		mem := &memBudget{limit: int64(limit) + 1}
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		parts := bytes.Split(in, []byte("\n"))
		for i, want := range parts[:len(parts)-1] {
			line, tooLong, _, err := readLine(r, limit, mem)
			if err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			if tooLong != (len(want) > limit) || (!tooLong && !bytes.Equal(line, want)) {
				t.Fatalf("line %d: got %q tooLong=%v, want %q (limit %d)", i, line, tooLong, want, limit)
			}
			mem.release(cap(line))
		}
		_, _, partial, err := readLine(r, limit, mem)
		if err == nil || partial != (len(parts[len(parts)-1]) > 0) {
			t.Fatalf("rest %q: err %v partial %v", parts[len(parts)-1], err, partial)
		}
		if mem.peak.Load() > int64(limit)+1 || mem.held.Load() != 0 {
			t.Fatalf("budget peak %d held %d, limit %d", mem.peak.Load(), mem.held.Load(), limit)
		}
	})
}
