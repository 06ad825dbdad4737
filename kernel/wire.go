package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// wireReply is the runner's reply frame.
type wireReply struct {
	ID             string      `json:"id"`
	Status         ReplyStatus `json:"status"`
	Stdout         string      `json:"stdout"`
	Stderr         string      `json:"stderr"`
	StdoutClipped  bool        `json:"stdout_clipped"`
	StdoutLen      int         `json:"stdout_len"`
	StderrClipped  bool        `json:"stderr_clipped"`
	Traceback      string      `json:"traceback"`
	ExitCode       int         `json:"exit_code"`
	ExecutionCount int         `json:"execution_count"`
	StderrClosed   bool        `json:"stderr_closed"`
	// DisplaysDropped counts displays the runner dropped at their caps.
	DisplaysDropped int `json:"displays_dropped"`
	// StdoutTail and StderrTail are the streams' last bytes when the
	// runner clipped them at their caps; StderrLen is stderr's size.
	StdoutTail string `json:"stdout_tail"`
	StderrTail string `json:"stderr_tail"`
	StderrLen  int    `json:"stderr_len"`
	// EName, EValue and Frames are the exception's structured form
	// (Frames: its traceback entries joined by NUL).
	EName  string `json:"ename"`
	EValue string `json:"evalue"`
	Frames string `json:"frames"`
}

// maxTracebackEntries bounds the entries of one exception's traceback as
// the runner sends them (the first 40, a gap notice, the last 60); a
// forged frame's extra entries stay in the last one.
const maxTracebackEntries = 101

// exception is the reply's structured exception, nil when it has none.
func (r *wireReply) exception() *Exception {
	if r.EName == "" {
		return nil
	}
	entries := strings.SplitN(r.Frames, "\x00", maxTracebackEntries)
	if r.Frames == "" {
		entries = nil
	}
	return &Exception{EName: r.EName, EValue: r.EValue, Traceback: entries}
}

// maxNumberLen bounds a number token (an int64 has 20 characters with its sign).
const maxNumberLen = 32

// decodeFrame decodes one reply frame from r, which yields exactly the
// frame's body and then io.EOF.
//
// It is a strict streaming parser for the flat object the runner writes
// (string, integer and boolean members; unknown members with scalar values
// are skipped unread), not a general JSON decoder: nothing is allocated for
// what the frame claims, each member is decoded into a buffer that grows
// only as its bytes arrive, capped per member (caps for stdout, stderr
// and their tails, TracebackBytes for the traceback, evalue and frames,
// ErrorNameBytes for ename, smallFieldBytes for the rest), and every byte
// kept is charged to acct. Escape-free runs are copied with memchr.
// Arrays, nested objects and trailing bytes are protocol errors. Invalid
// UTF-8 is replaced with U+FFFD, as encoding/json does. An error reading r
// other than the frame's end is returned as is (not a protocol error).
func decodeFrame(r *bufio.Reader, acct *budget, caps frameCaps) (*wireReply, error) {
	p := &wireParser{r: r, acct: acct, caps: caps}
	if err := p.ws(); err != nil {
		return nil, err
	}
	if c, err := p.byte(); err != nil || c != '{' {
		return nil, p.fail(err, "frame is not a JSON object")
	}
	rep := new(wireReply)
	if err := p.members(rep); err != nil {
		return nil, err
	}
	if err := p.ws(); err != nil {
		return nil, err
	}
	if _, err := p.r.ReadByte(); !errors.Is(err, io.EOF) {
		return nil, p.fail(err, "frame has bytes after its JSON object")
	}
	if !rep.Status.Known() {
		return nil, protocolErr("reply has unknown status " + quote(string(rep.Status)))
	}
	return rep, nil
}

// decodeReply decodes a whole body held in memory (tests and fuzzing).
func decodeReply(body []byte) (*wireReply, error) {
	acct := &budget{limit: 1 << 40}
	return decodeFrame(bufio.NewReader(bytes.NewReader(body)), acct, defaultFrameCaps)
}

type wireParser struct {
	r    *bufio.Reader
	acct *budget
	caps frameCaps
	// Scratch for member names and number tokens: nothing is allocated
	// per member, however many members a frame repeats.
	name [smallFieldBytes]byte
	tok  [maxNumberLen]byte
}

// memberNames are the members the runner writes; memberName returns one of
// these (or unknownMember), never a string built from the frame.
var memberNames = []string{"id", "status", "stdout", "stderr", "stdout_clipped", "stdout_len",
	"stderr_clipped", "traceback", "exit_code", "execution_count", "stderr_closed", "displays_dropped",
	"ename", "evalue", "frames", "stdout_tail", "stderr_tail", "stderr_len"}

const unknownMember = "(unknown member)"

// memberName decodes a member name into the parser's scratch space and
// returns it with its index in memberNames (-1: unknown).
func (p *wireParser) memberName() (string, int, error) {
	if c, err := p.byte(); err != nil || c != '"' {
		return "", -1, p.fail(err, "frame: expected a string")
	}
	n := 0
	err := p.scanString(func(b []byte) error {
		if n+len(b) > len(p.name) {
			return protocolErr(fmt.Sprintf("frame member name exceeds %d bytes", len(p.name)))
		}
		n += copy(p.name[n:], b)
		return nil
	})
	if err != nil {
		return "", -1, err
	}
	for i, m := range memberNames {
		if string(p.name[:n]) == m {
			return m, i, nil
		}
	}
	return unknownMember, -1, nil
}

// fail turns the frame's end into a protocol error saying what was
// expected; other read errors pass through.
func (p *wireParser) fail(err error, detail string) error {
	if err == nil || errors.Is(err, io.EOF) {
		return protocolErr(detail)
	}
	return err
}

func (p *wireParser) byte() (byte, error) { return p.r.ReadByte() }

// peek returns the next byte without consuming it.
func (p *wireParser) peek() (byte, error) {
	b, err := p.r.Peek(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// ws skips whitespace; the frame's end is not an error here.
func (p *wireParser) ws() error {
	for {
		c, err := p.peek()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			_, _ = p.r.ReadByte()
		default:
			return nil
		}
	}
}

// expect consumes c after optional whitespace.
func (p *wireParser) expect(c byte, detail string) (bool, error) {
	if err := p.ws(); err != nil {
		return false, err
	}
	got, err := p.peek()
	if err != nil {
		return false, p.fail(err, detail)
	}
	if got != c {
		return false, nil
	}
	_, _ = p.r.ReadByte()
	return true, nil
}

func (p *wireParser) members(rep *wireReply) error {
	if ok, err := p.expect('}', "frame: unterminated object"); ok || err != nil {
		return err
	}
	var seen uint32 // known members decoded so far: the runner never repeats one
	for {
		if err := p.ws(); err != nil {
			return err
		}
		key, idx, err := p.memberName()
		if err != nil {
			return err
		}
		if idx >= 0 {
			if seen&(1<<idx) != 0 {
				return protocolErr("frame repeats member " + quote(key))
			}
			seen |= 1 << idx
		}
		if ok, err := p.expect(':', "frame: unterminated object"); err != nil || !ok {
			return p.fail(err, "frame: expected ':' after member "+quote(key))
		}
		if err := p.ws(); err != nil {
			return err
		}
		if err := p.member(rep, key); err != nil {
			return err
		}
		if ok, err := p.expect('}', "frame: unterminated object"); ok || err != nil {
			return err
		}
		if ok, err := p.expect(',', "frame: unterminated object"); err != nil || !ok {
			return p.fail(err, "frame: expected ',' or '}' after member "+quote(key))
		}
	}
}

func (p *wireParser) member(rep *wireReply, key string) (err error) {
	switch key {
	case "id":
		rep.ID, err = p.str(smallFieldBytes, key)
	case "status":
		var s string
		s, err = p.str(smallFieldBytes, key)
		rep.Status = ReplyStatus(s)
	case "stdout":
		rep.Stdout, err = p.str(p.caps.stdout, key)
	case "stderr":
		rep.Stderr, err = p.str(p.caps.stderr, key)
	case "stdout_tail":
		rep.StdoutTail, err = p.str(p.caps.tail, key)
	case "stderr_tail":
		rep.StderrTail, err = p.str(p.caps.tail, key)
	case "stderr_len":
		rep.StderrLen, err = p.integer(key)
	case "traceback":
		rep.Traceback, err = p.str(TracebackBytes, key)
	case "ename":
		rep.EName, err = p.str(ErrorNameBytes, key)
	case "evalue":
		rep.EValue, err = p.str(TracebackBytes, key)
	case "frames":
		rep.Frames, err = p.str(TracebackBytes, key)
	case "stdout_clipped":
		rep.StdoutClipped, err = p.boolean(key)
	case "stderr_clipped":
		rep.StderrClipped, err = p.boolean(key)
	case "stderr_closed":
		rep.StderrClosed, err = p.boolean(key)
	case "stdout_len":
		rep.StdoutLen, err = p.integer(key)
	case "exit_code":
		rep.ExitCode, err = p.integer(key)
	case "execution_count":
		rep.ExecutionCount, err = p.integer(key)
	case "displays_dropped":
		rep.DisplaysDropped, err = p.integer(key)
	default:
		err = p.skipScalar(key)
	}
	return err
}

// token reads the run of bytes that can form a JSON number or literal
// (at most maxNumberLen of them).
func (p *wireParser) token(key string) (string, error) {
	buf := &p.tok
	n := 0
	for {
		c, err := p.peek()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		if !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' || c == 'E') {
			break
		}
		if n == len(buf) {
			return "", protocolErr("frame: member " + quote(key) + " has an over-long value")
		}
		buf[n] = c
		n++
		_, _ = p.r.ReadByte()
	}
	// A view of the scratch space: callers compare and parse it, never keep it.
	return unsafeString(buf[:n]), nil
}

func (p *wireParser) boolean(key string) (bool, error) {
	tok, err := p.token(key)
	switch {
	case err != nil:
		return false, err
	case tok == "true":
		return true, nil
	case tok == "false":
		return false, nil
	}
	return false, protocolErr("frame: member " + quote(key) + " is not a boolean")
}

func (p *wireParser) integer(key string) (int, error) {
	tok, err := p.token(key)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(tok)
	if err != nil || (len(tok) > 1 && tok[0] == '0') || (len(tok) > 2 && tok[:2] == "-0") {
		return 0, protocolErr("frame: member " + quote(key) + " is not an integer")
	}
	return n, nil
}

func (p *wireParser) skipScalar(key string) error {
	if c, err := p.peek(); err == nil && c == '"' {
		return p.skipString(key)
	}
	tok, err := p.token(key)
	if err != nil {
		return err
	}
	switch tok {
	case "true", "false", "null":
		return nil
	}
	if _, err := strconv.ParseFloat(tok, 64); err != nil || tok == "" || tok[0] == '+' || tok[0] == '.' {
		return protocolErr("frame: member " + quote(key) + " has an unsupported value")
	}
	return nil
}

// str decodes the JSON string at the reader into at most limit bytes,
// charging what it keeps.
func (p *wireParser) str(limit int, name string) (string, error) {
	if c, err := p.byte(); err != nil || c != '"' {
		return "", p.fail(err, "frame: expected a string")
	}
	s := fieldBuf{limit: limit, name: name, acct: p.acct}
	if err := p.scanString(s.add); err != nil {
		return "", err
	}
	return s.finish()
}

// skipString consumes an unknown member's string without keeping it.
func (p *wireParser) skipString(string) error {
	_, _ = p.r.ReadByte() // the opening quote
	return p.scanString(func([]byte) error { return nil })
}

// maxEscapeLen is the longest escape: a surrogate pair, \uXXXX\uXXXX.
const maxEscapeLen = 12

// scanString hands the decoded bytes of the string after its opening
// quote to emit, in chunks, through the closing quote. It works on the
// reader's buffer: escape-free runs are found with memchr and escapes
// decoded in place; only an escape across the buffer's end is refilled.
func (p *wireParser) scanString(emit func([]byte) error) error {
	var esc [utf8.UTFMax]byte
	for {
		chunk, err := p.r.Peek(max(p.r.Buffered(), 1))
		if err != nil {
			return p.fail(err, "frame: unterminated string")
		}
		i, done, err := scanChunk(chunk, esc[:0], emit)
		_, _ = p.r.Discard(i)
		if done || err != nil {
			return err
		}
		if i == len(chunk) {
			continue
		}
		// An escape that may cross the buffer's end: look at it whole.
		tail, err := p.r.Peek(maxEscapeLen)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		out, n, err := unescape(tail, esc[:0])
		if err != nil {
			return err
		}
		if err := emit(out); err != nil {
			return err
		}
		_, _ = p.r.Discard(n)
	}
}

// scanChunk emits the decoded bytes of chunk up to the closing quote
// (done, i past it), the end of chunk, or an escape within maxEscapeLen of
// its end (i at the backslash).
func scanChunk(chunk, esc []byte, emit func([]byte) error) (i int, done bool, err error) {
	for {
		rest := chunk[i:]
		// The backslash first: where escapes are dense, both searches
		// then stay short (the closing quote may be far away).
		stop := bytes.IndexByte(rest, '\\')
		if stop < 0 {
			stop = len(rest)
		}
		if q := bytes.IndexByte(rest[:stop], '"'); q >= 0 {
			return i + q + 1, true, emit(rest[:q])
		}
		if err := emit(rest[:stop]); err != nil {
			return i, false, err
		}
		i += stop
		if i == len(chunk) || len(chunk)-i < maxEscapeLen {
			return i, false, nil
		}
		out, n, err := unescape(chunk[i:], esc)
		if err == nil {
			err = emit(out)
		}
		if err != nil {
			return i, false, err
		}
		i += n
	}
}
