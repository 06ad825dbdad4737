package kernel

import (
	"strings"
	"testing"
)

// A write that exactly fills what the head's array already holds needs no
// growth and no charge: 4096 bytes of output fit a 5000-byte budget, even
// when they come in two writes (the first allocates a 4096-byte array).
func TestCapBufExactFillChargesNothingMore(t *testing.T) {
	acct := &budget{limit: 5000}
	c := capBuf{cap: 10_000, acct: acct}
	first, rest := "a", strings.Repeat("b", 4095)
	if kept := c.write([]byte(first)); string(kept) != first {
		t.Fatalf("first write kept %q", kept)
	}
	if kept := c.write([]byte(rest)); string(kept) != rest {
		t.Fatalf("second write kept %d of %d bytes", len(kept), len(rest))
	}
	seg := c.segment()
	if seg.head != first+rest || seg.total != 4096 {
		t.Fatalf("head %d bytes, total %d; want all 4096", len(seg.head), seg.total)
	}
	if held := acct.held.Load(); held != 4096 {
		t.Fatalf("%d bytes charged for 4096 bytes of output", held)
	}
}
