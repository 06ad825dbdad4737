package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
)

// Pattern reads n deterministic bytes that are not all alike: a large
// upload that costs the test no memory, checked against PatternSum.
type Pattern struct{ n, off int64 }

// NewPattern is a Pattern of n bytes.
func NewPattern(n int64) *Pattern { return &Pattern{n: n} }

func (p *Pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n-p.off)]
	for i := range b {
		x := p.off + int64(i)
		b[i] = byte(x*7 + x>>11)
	}
	p.off += int64(len(b))
	return len(b), nil
}

// PatternSum is the hex SHA-256 of the n bytes of NewPattern(n).
func PatternSum(n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, NewPattern(n))
	return hex.EncodeToString(h.Sum(nil))
}
