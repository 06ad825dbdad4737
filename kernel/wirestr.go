package kernel

// The string half of the frame decoder: escapes and the capped, accounted
// buffer each member is decoded into.

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// unescape decodes the escape at the start of b (b[0] is the backslash)
// into buf and reports how many bytes of b it used. A high surrogate not
// followed by its low half yields U+FFFD and leaves the rest alone (as
// encoding/json does).
func unescape(b, buf []byte) ([]byte, int, error) {
	if len(b) < 2 {
		return nil, 0, protocolErr("frame: unterminated string")
	}
	switch c := b[1]; c {
	case '"', '\\', '/':
		return append(buf, c), 2, nil
	case 'b':
		return append(buf, '\b'), 2, nil
	case 'f':
		return append(buf, '\f'), 2, nil
	case 'n':
		return append(buf, '\n'), 2, nil
	case 'r':
		return append(buf, '\r'), 2, nil
	case 't':
		return append(buf, '\t'), 2, nil
	case 'u':
		if len(b) < 6 {
			return nil, 0, protocolErr("frame: bad \\u escape")
		}
		r, ok := parseHex4(b[2:6])
		if !ok {
			return nil, 0, protocolErr("frame: bad \\u escape")
		}
		if !utf16.IsSurrogate(r) {
			return utf8.AppendRune(buf, r), 6, nil
		}
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if low, ok := parseHex4(b[8:12]); ok {
				if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
					return utf8.AppendRune(buf, pair), 12, nil
				}
			}
		}
		return utf8.AppendRune(buf, utf8.RuneError), 6, nil
	default:
		return nil, 0, protocolErr("frame: bad escape \\" + string(rune(c)))
	}
}

func parseHex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
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
	return r, true
}

// fieldBuf collects one member's decoded bytes: it grows only as bytes
// arrive (never to a claimed size), refuses to pass limit and charges each
// growth of its backing array to acct (the replaced array is garbage).
type fieldBuf struct {
	b     []byte
	limit int
	name  string
	acct  *budget
}

func (f *fieldBuf) add(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	need := len(f.b) + len(p)
	if need > f.limit {
		return protocolErr(fmt.Sprintf("frame member %s exceeds its cap of %d bytes", quote(f.name), f.limit))
	}
	if need > cap(f.b) {
		grown := min(max(2*cap(f.b), need, 512), f.limit)
		if err := f.acct.charge(grown - cap(f.b)); err != nil {
			return err
		}
		f.b = append(make([]byte, 0, grown), f.b...)
	}
	// Reslicing in place stores no pointer: no GC write barrier per chunk.
	n := len(f.b)
	f.b = f.b[:need]
	copy(f.b[n:], p)
	return nil
}

// finish returns the member as a string (invalid UTF-8 replaced), without
// copying valid bytes again. A replaced copy must fit the member's cap
// and the budget too; the raw buffer is then dropped.
func (f *fieldBuf) finish() (string, error) {
	if utf8.Valid(f.b) {
		return unsafeString(f.b), nil
	}
	if err := f.acct.charge(len(f.b) + 3); err != nil { // the copy ToValidUTF8 starts with
		return "", err
	}
	s := strings.ToValidUTF8(unsafeString(f.b), "\uFFFD")
	if len(s) > f.limit { // an honest runner's replacements never grow a member
		return "", protocolErr(fmt.Sprintf("frame member %s exceeds its cap of %d bytes", quote(f.name), f.limit))
	}
	if extra := len(s) - len(f.b) - 3; extra > 0 {
		if err := f.acct.charge(extra); err != nil {
			return "", err
		}
	} else {
		f.acct.release(-extra)
	}
	f.acct.release(cap(f.b))
	return s, nil
}

// unsafeString views b as a string without copying. The caller must never
// modify b afterwards (fieldBuf drops its buffer once it returns).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
