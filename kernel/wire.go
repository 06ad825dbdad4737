package kernel

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// wireReply is the runner's reply frame.
type wireReply struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	StdoutClipped  bool   `json:"stdout_clipped"`
	StdoutLen      int    `json:"stdout_len"`
	StderrClipped  bool   `json:"stderr_clipped"`
	Traceback      string `json:"traceback"`
	ExitCode       int    `json:"exit_code"`
	ExecutionCount int    `json:"execution_count"`
	StderrClosed   bool   `json:"stderr_closed"`
}

// decodeReply decodes one reply frame in a single pass.
//
// It is a strict parser for the flat object the runner writes (string,
// integer and boolean members; unknown members with scalar values are
// skipped), not a general JSON decoder: encoding/json validates the whole
// body and then decodes strings rune by rune, about 5 ms for a 1 MiB cell,
// while this copies escape-free runs with memchr. Anything else (arrays,
// nested objects, trailing bytes) is a protocol error. Invalid UTF-8 is
// replaced with U+FFFD, as encoding/json does.
func decodeReply(body []byte) (*wireReply, error) {
	p := &wireParser{b: body, nextQ: -2, nextBS: -2}
	p.ws()
	if !p.eat('{') {
		return nil, protocolErr("frame is not a JSON object")
	}
	rep := new(wireReply)
	if err := p.members(rep); err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, protocolErr("frame has bytes after its JSON object")
	}
	switch rep.Status {
	case "ok", "error", "exit":
	default:
		return nil, protocolErr("reply has unknown status " + quote(rep.Status))
	}
	return rep, nil
}

type wireParser struct {
	b []byte
	i int
	// Positions of the next '"' and '\\' at or after i (-1: none left);
	// cached so a string with many escapes is still scanned once.
	nextQ, nextBS int
}

func (p *wireParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *wireParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *wireParser) members(rep *wireReply) error {
	p.ws()
	if p.eat('}') {
		return nil
	}
	for {
		p.ws()
		key, err := p.str()
		if err != nil {
			return err
		}
		p.ws()
		if !p.eat(':') {
			return protocolErr("frame: expected ':' after member " + quote(key))
		}
		p.ws()
		if err := p.member(rep, key); err != nil {
			return err
		}
		p.ws()
		if p.eat('}') {
			return nil
		}
		if !p.eat(',') {
			return protocolErr("frame: expected ',' or '}' after member " + quote(key))
		}
	}
}

func (p *wireParser) member(rep *wireReply, key string) (err error) {
	switch key {
	case "id":
		rep.ID, err = p.str()
	case "status":
		rep.Status, err = p.str()
	case "stdout":
		rep.Stdout, err = p.str()
	case "stderr":
		rep.Stderr, err = p.str()
	case "traceback":
		rep.Traceback, err = p.str()
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
	default:
		err = p.skipScalar(key)
	}
	return err
}

func (p *wireParser) boolean(key string) (bool, error) {
	switch {
	case bytes.HasPrefix(p.b[p.i:], []byte("true")):
		p.i += 4
		return true, nil
	case bytes.HasPrefix(p.b[p.i:], []byte("false")):
		p.i += 5
		return false, nil
	}
	return false, protocolErr("frame: member " + quote(key) + " is not a boolean")
}

// token returns the run of bytes that can form a JSON number or literal.
func (p *wireParser) token() string {
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' || c == 'E' {
			p.i++
			continue
		}
		break
	}
	return string(p.b[start:p.i])
}

func (p *wireParser) integer(key string) (int, error) {
	tok := p.token()
	n, err := strconv.Atoi(tok)
	if err != nil || (len(tok) > 1 && tok[0] == '0') || (len(tok) > 2 && tok[:2] == "-0") {
		return 0, protocolErr("frame: member " + quote(key) + " is not an integer")
	}
	return n, nil
}

func (p *wireParser) skipScalar(key string) error {
	if p.i < len(p.b) && p.b[p.i] == '"' {
		_, err := p.str()
		return err
	}
	tok := p.token()
	switch tok {
	case "true", "false", "null":
		return nil
	}
	if _, err := strconv.ParseFloat(tok, 64); err != nil || tok == "" || tok[0] == '+' || tok[0] == '.' {
		return protocolErr("frame: member " + quote(key) + " has an unsupported value")
	}
	return nil
}

// next finds c at or after p.i, reusing a cached position still ahead
// (-1: none left, -2: unknown). p.i only grows, so "none left" stays true.
func (p *wireParser) next(c byte, cached *int) int {
	if *cached == -1 || *cached >= p.i {
		return *cached
	}
	k := bytes.IndexByte(p.b[p.i:], c)
	if k >= 0 {
		k += p.i
	}
	*cached = k
	return k
}

// str decodes the JSON string at p.i.
func (p *wireParser) str() (string, error) {
	if !p.eat('"') {
		return "", protocolErr("frame: expected a string")
	}
	var buf []byte
	for {
		q := p.next('"', &p.nextQ)
		if q < 0 {
			return "", protocolErr("frame: unterminated string")
		}
		bs := p.next('\\', &p.nextBS)
		if bs < 0 || bs > q {
			chunk := p.b[p.i:q]
			p.i = q + 1
			if buf == nil {
				return validString(chunk), nil
			}
			return validString(append(buf, chunk...)), nil
		}
		if buf == nil {
			buf = make([]byte, 0, len(p.b)-p.i)
		}
		buf = append(buf, p.b[p.i:bs]...)
		p.i = bs + 1
		var err error
		if buf, err = p.escape(buf); err != nil {
			return "", err
		}
	}
}

// escape decodes the escape after a backslash (p.i is past it).
func (p *wireParser) escape(buf []byte) ([]byte, error) {
	if p.i >= len(p.b) {
		return nil, protocolErr("frame: unterminated string")
	}
	c := p.b[p.i]
	p.i++
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return nil, protocolErr("frame: bad \\u escape")
		}
		if utf16.IsSurrogate(r) {
			r = p.lowSurrogate(r)
		}
		return utf8.AppendRune(buf, r), nil
	}
	return nil, protocolErr("frame: bad escape \\" + string(rune(c)))
}

// lowSurrogate completes a surrogate pair if "\\uXXXX" follows, else
// yields U+FFFD and leaves the input alone (as encoding/json does).
func (p *wireParser) lowSurrogate(high rune) rune {
	save := p.i
	if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
		p.i += 2
		if low, ok := p.hex4(); ok {
			if r := utf16.DecodeRune(high, low); r != utf8.RuneError {
				return r
			}
		}
	}
	p.i = save
	return utf8.RuneError
}

func (p *wireParser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
