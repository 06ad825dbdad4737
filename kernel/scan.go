package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
)

// scanBufSize is the read buffer of each output reader.
const scanBufSize = 64 << 10

// maxHeaderDigits bounds a frame header: more digits than any int64 holds
// cannot be a length this package would accept.
const maxHeaderDigits = 19

// scanner splits one output stream of the kernel into raw bytes and marked
// headers "<marker><decimal digits>\n". A marker followed by anything else is
// raw output (user output that happens to contain the marker bytes).
//
// Raw bytes carry the cell epoch that was current when they were read, so
// bytes held back (a possible marker prefix) and emitted after the next read
// are still attributed to the cell that was running when they arrived.
type scanner struct {
	r      io.Reader
	marker []byte
	kinds  string // header kinds accepted after the marker (' ': a bare number)
	epoch  *atomic.Uint64
	buf    []byte
	start  int
	end    int
	// carried bytes at buf[start:] were read before the latest read, with
	// carriedEpoch; the rest with readEpoch.
	carried      int
	carriedEpoch uint64
	readEpoch    uint64
	bodyR        bodyReader
	bodyBuf      *bufio.Reader
}

func newScanner(r io.Reader, marker []byte, kinds string, epoch *atomic.Uint64) *scanner {
	return &scanner{r: r, marker: marker, kinds: kinds, epoch: epoch, buf: make([]byte, scanBufSize)}
}

// run scans until the stream ends or a handler fails. raw receives output
// bytes with their epoch; header receives each header's number and may read
// a body that follows it with readBody. It returns io.EOF at the end of the
// stream, a read error, or the handler's error.
func (s *scanner) run(raw func([]byte, uint64), header func(kind byte, n int64) error) error {
	for {
		if err := s.fill(); err != nil {
			s.emit(s.end-s.start, raw)
			return err
		}
		if err := s.process(raw, header); err != nil {
			return err
		}
	}
}

// fill reads more bytes, compacting the buffer first.
func (s *scanner) fill() error {
	if s.start > 0 {
		copy(s.buf, s.buf[s.start:s.end])
		s.end -= s.start
		s.start = 0
	}
	if s.end > 0 {
		if s.carried == 0 {
			s.carriedEpoch = s.readEpoch
		}
		s.carried = s.end
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.readEpoch = s.epoch.Load()
	s.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// process handles every complete marker in the buffer and emits raw bytes
// up to a possible partial marker at its end.
func (s *scanner) process(raw func([]byte, uint64), header func(kind byte, n int64) error) error {
	for {
		data := s.buf[s.start:s.end]
		i := bytes.Index(data, s.marker)
		if i < 0 {
			s.emit(len(data)-s.heldTail(data), raw)
			return nil
		}
		s.emit(i, raw)
		kind, n, size, st := parseHeader(s.buf[s.start+len(s.marker):s.end], s.kinds)
		switch st {
		case headerTooLong:
			return fmt.Errorf("%w: frame header has more than %d digits", ErrProtocol, maxHeaderDigits)
		case headerIncomplete:
			return nil // read more
		case headerNone:
			s.emit(len(s.marker), raw) // not a header: the marker is output
			continue
		}
		s.consume(len(s.marker) + size)
		if err := header(kind, n); err != nil {
			return err
		}
	}
}

// Results of parseHeader.
const (
	headerOK = iota
	headerIncomplete
	headerNone
	headerTooLong
)

// parseHeader reads "[<kind> ]<digits>\n" after a marker: kind is one of
// kinds (0 when kinds allows a bare number, i.e. starts with a space).
// size is the header's length after the marker.
func parseHeader(b []byte, kinds string) (kind byte, n int64, size, status int) {
	i := 0
	switch {
	case len(b) == 0:
		return 0, 0, 0, headerIncomplete
	case b[0] >= 'A' && b[0] <= 'Z':
		if strings.IndexByte(kinds, b[0]) < 0 {
			return 0, 0, 0, headerNone
		}
		if len(b) < 2 {
			return 0, 0, 0, headerIncomplete
		}
		if b[1] != ' ' {
			return 0, 0, 0, headerNone
		}
		kind, i = b[0], 2
	case kinds == "" || kinds[0] != ' ':
		return 0, 0, 0, headerNone
	}
	j := i
	for j < len(b) && j-i <= maxHeaderDigits && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	switch {
	case j-i > maxHeaderDigits:
		return 0, 0, 0, headerTooLong
	case j == len(b):
		return 0, 0, 0, headerIncomplete
	case j == i || b[j] != '\n':
		return 0, 0, 0, headerNone
	}
	for _, c := range b[i:j] {
		n = n*10 + int64(c-'0')
	}
	return kind, n, j + 1, headerOK
}

// heldTail is how many bytes at the end of data could start a marker.
// The marker begins with '\n' and holds no other '\n', so only the suffix
// from the last '\n' can be a prefix of it.
func (s *scanner) heldTail(data []byte) int {
	from := len(data) - len(s.marker) + 1
	if from < 0 {
		from = 0
	}
	k := bytes.LastIndexByte(data[from:], '\n')
	if k < 0 {
		return 0
	}
	tail := data[from+k:]
	if bytes.HasPrefix(s.marker, tail) {
		return len(tail)
	}
	return 0
}

// emit hands n raw bytes from the buffer's start to raw.
func (s *scanner) emit(n int, raw func([]byte, uint64)) {
	if n <= 0 {
		return
	}
	c := min(s.carried, n)
	if c > 0 {
		raw(s.buf[s.start:s.start+c], s.carriedEpoch)
	}
	if n > c {
		raw(s.buf[s.start+c:s.start+n], s.readEpoch)
	}
	s.consume(n)
}

func (s *scanner) consume(n int) {
	s.start += n
	s.carried = max(s.carried-n, 0)
}

// body returns a reader of exactly the n bytes following a header: first
// those already buffered, then the stream. Nothing of size n is
// allocated; the caller decodes the body as it streams.
func (s *scanner) body(n int64) *bufio.Reader {
	c := int(min(int64(s.end-s.start), n))
	s.bodyR.pre = s.buf[s.start : s.start+c]
	s.bodyR.r = s.r
	s.bodyR.left = n - int64(c)
	s.consume(c)
	if s.bodyBuf == nil {
		s.bodyBuf = bufio.NewReaderSize(&s.bodyR, bodyBufSize)
	} else {
		s.bodyBuf.Reset(&s.bodyR)
	}
	return s.bodyBuf
}

// bodyBufSize is the frame decoder's read-ahead.
const bodyBufSize = 16 << 10

// bodyReader yields pre, then left bytes of r, then io.EOF. The stream
// ending before that is io.ErrUnexpectedEOF (the kernel died mid-frame),
// which is not the frame's end.
type bodyReader struct {
	pre  []byte
	r    io.Reader
	left int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		n := copy(p, b.pre)
		b.pre = b.pre[n:]
		return n, nil
	}
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if b.left > 0 {
			return n, fmt.Errorf("read frame body: %w", io.ErrUnexpectedEOF)
		}
		err = nil
	}
	return n, err
}
