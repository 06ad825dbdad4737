package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	epoch  *atomic.Uint64
	buf    []byte
	start  int
	end    int
	// carried bytes at buf[start:] were read before the latest read, with
	// carriedEpoch; the rest with readEpoch.
	carried      int
	carriedEpoch uint64
	readEpoch    uint64
}

func newScanner(r io.Reader, marker []byte, epoch *atomic.Uint64) *scanner {
	return &scanner{r: r, marker: marker, epoch: epoch, buf: make([]byte, scanBufSize)}
}

// run scans until the stream ends or a handler fails. raw receives output
// bytes with their epoch; header receives each header's number and may read
// a body that follows it with readBody. It returns io.EOF at the end of the
// stream, a read error, or the handler's error.
func (s *scanner) run(raw func([]byte, uint64), header func(int64) error) error {
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
func (s *scanner) process(raw func([]byte, uint64), header func(int64) error) error {
	for {
		data := s.buf[s.start:s.end]
		i := bytes.Index(data, s.marker)
		if i < 0 {
			s.emit(len(data)-s.heldTail(data), raw)
			return nil
		}
		s.emit(i, raw)
		digits := s.buf[s.start+len(s.marker) : s.end]
		j := 0
		for j < len(digits) && j <= maxHeaderDigits && digits[j] >= '0' && digits[j] <= '9' {
			j++
		}
		switch {
		case j > maxHeaderDigits:
			return fmt.Errorf("%w: frame header has more than %d digits", ErrProtocol, maxHeaderDigits)
		case j == len(digits):
			return nil // header incomplete: read more
		case j == 0 || digits[j] != '\n':
			s.emit(len(s.marker), raw) // not a header: the marker is output
			continue
		}
		var n int64
		for _, c := range digits[:j] {
			n = n*10 + int64(c-'0')
		}
		s.consume(len(s.marker) + j + 1)
		if err := header(n); err != nil {
			return err
		}
	}
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

// readBody reads exactly n bytes following a header into a new buffer.
func (s *scanner) readBody(n int64) ([]byte, error) {
	body := make([]byte, n)
	c := copy(body, s.buf[s.start:s.end])
	s.consume(c)
	if _, err := io.ReadFull(s.r, body[c:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read frame body: %w", err)
	}
	return body, nil
}
