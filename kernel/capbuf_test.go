package kernel

import (
	"errors"
	"fmt"
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

// A charge that would pass the limit fails and changes nothing; one that
// reaches the limit exactly succeeds.
func TestBudgetChargeAtTheLimit(t *testing.T) {
	b := &budget{limit: 100}
	steps := []struct {
		n        int
		ok       bool
		held     int64
		peak     int64
		scenario string
	}{
		{80, true, 80, 80, "under the limit"},
		{50, false, 80, 80, "past the limit: refused, nothing held"},
		{20, true, 100, 100, "exactly at the limit"},
		{1, false, 100, 100, "one byte past it"},
	}
	for _, s := range steps {
		err := b.charge(s.n)
		if (err == nil) != s.ok || b.held.Load() != s.held || b.peak.Load() != s.peak {
			t.Fatalf("%s: charge(%d) = %v, held %d, peak %d; want ok=%v, %d, %d",
				s.scenario, s.n, err, b.held.Load(), b.peak.Load(), s.ok, s.held, s.peak)
		}
	}
}

// quote cuts what a protocol error repeats of the kernel's words at 64
// bytes, and only past them.
func TestQuoteCutsPast64Bytes(t *testing.T) {
	s64 := strings.Repeat("a", 64)
	if got := quote(s64); got != `"`+s64+`"` {
		t.Errorf("quote of 64 bytes = %s", got)
	}
	if got := quote(s64 + "b"); got != `"`+s64+`..."` {
		t.Errorf("quote of 65 bytes = %s", got)
	}
}

// A display may carry maxDisplayMimes (32) mime types and as many metadata
// entries, each mime type of up to maxMimeLen (128) bytes; one more of any
// is a protocol error.
func TestDisplayShapeLimits(t *testing.T) {
	members := func(n int, name func(int) string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + name(i) + `":"x"`)
		}
		return b.String()
	}
	mime := func(i int) string { return "text/x-" + itoa(i) }
	cases := []struct {
		name, body string
		ok         bool
	}{
		{"32 mime types", `{"data":{` + members(32, mime) + `}}`, true},
		{"33 mime types", `{"data":{` + members(33, mime) + `}}`, false},
		{"32 metadata", `{"data":{"text/plain":"x"},"metadata":{` + members(32, mime) + `}}`, true},
		{"33 metadata", `{"data":{"text/plain":"x"},"metadata":{` + members(33, mime) + `}}`, false},
		{"a 128-byte mime type", `{"data":{"` + strings.Repeat("m", 128) + `":"x"}}`, true},
		{"a 129-byte mime type", `{"data":{"` + strings.Repeat("m", 129) + `":"x"}}`, false},
		{"no mime type", `{"data":{}}`, false},
	}
	for _, c := range cases {
		d, err := decodeDisplay(strings.NewReader(c.body), int64(len(c.body)), &budget{limit: 1 << 20})
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrProtocol)) || (c.ok && d == nil) {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// The runner's H marks: up to maxHelpers (4) pids kept, each in
// 1..2^31-1, and none once the first cell began.
func TestHelperMarksBounds(t *testing.T) {
	c := newCellState(100, 100, 10, 1<<20)
	for _, pid := range []int64{0, -1, 1 << 31, 1<<31 - 1, 1, 2, 3, 5} {
		c.helper(pid)
	}
	if got := fmt.Sprint(c.helperPids()); got != "[2147483647 1 2 3]" {
		t.Fatalf("helpers %s, want [2147483647 1 2 3]", got)
	}
	c = newCellState(100, 100, 10, 1<<20)
	c.helper(7)
	c.begun(true, 0) // the first cell's begin mark on stderr
	c.helper(8)
	if got := fmt.Sprint(c.helperPids()); got != "[7]" {
		t.Fatalf("helpers %s after the first cell began, want [7]", got)
	}
}

// The process-group sandbox keeps the daemon's uid and says so with -1.
func TestProcessGroupUID(t *testing.T) {
	if uid := NewProcessGroup().UID(); uid != -1 {
		t.Fatalf("UID() = %d, want -1", uid)
	}
}
