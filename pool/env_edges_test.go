package pool

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Request env names match [A-Za-z_][A-Za-z0-9_]* and are 1 to 128 bytes
// long (docs/api.md, "Per-call environment"): the characters at each
// class's edge and just past it, a leading digit, and the length bound.
func TestEnvNameClassEdges(t *testing.T) {
	const class, length = "must match", "1 to 128 bytes"
	for _, c := range []struct {
		name string
		want string // "" accepted, else a piece of the error
	}{
		{"a", ""}, {"z", ""}, {"A", ""}, {"Z", ""}, {"_", ""},
		{"_0", ""}, {"A9", ""}, {"x0123456789", ""},
		{"`", class}, {"{", class}, {"@", class}, {"[", class},
		{"/", class}, {":", class}, {"A`", class}, {"A{", class}, {"A@", class}, {"A[", class},
		{"0", class}, {"9", class}, {"0A", class}, {"9_", class},
		{"", length},
		{strings.Repeat("V", 128), ""},
		{strings.Repeat("V", 129), length},
	} {
		err := checkEnvName(c.name)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q refused: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want ErrBadRequest with %q", c.name, err, c.want)
		}
	}
}

// A request env value holds no NUL, wherever it is, and is valid UTF-8.
func TestEnvValueNULAnywhere(t *testing.T) {
	p := &Pool{cfg: Config{Sessions: SessionConfig{MaxEnvNames: 64, MaxEnvBytes: 32 << 10}}}
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"plain", true}, {"", true}, {"é€", true},
		{"\x00", false}, {"\x00abc", false}, {"a\x00c", false}, {"abc\x00", false},
		{"\xff", false},
	} {
		names, err := p.checkEnv("env", "", map[string]string{"V": c.value})
		if c.ok && (err != nil || !slices.Equal(names, []string{"V"})) {
			t.Errorf("%q: %v %v, want accepted", c.value, names, err)
		}
		if !c.ok && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "NUL byte or invalid UTF-8")) {
			t.Errorf("%q: %v, want ErrBadRequest for a NUL or invalid UTF-8", c.value, err)
		}
	}
}

// Every request env value of 8 bytes or more is masked, shorter ones are
// not (docs/api.md): bytes, not characters ("é€12" is 7 bytes).
func TestMaskableFromEightBytes(t *testing.T) {
	got := maskable(map[string]string{"A": "", "B": "1234567", "C": "12345678", "D": "123456789", "E": "é€12", "F": "é€123"})
	slices.Sort(got)
	if want := []string{"12345678", "123456789", "é€123"}; !slices.Equal(got, want) {
		t.Fatalf("masked %q, want %q", got, want)
	}
}

// A kernel masks at most 1 MiB of request env values: a value that
// brings it to exactly 1 MiB is taken, one byte more is refused.
func TestMaskedEnvBytesExactBound(t *testing.T) {
	const mib = 1048576
	for _, c := range []struct {
		name   string
		before int // bytes the kernel masks already
		ok     bool
	}{
		{"to exactly 1 MiB", mib - 8, true},
		{"one byte past", mib - 7, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Pool{}
			lv := &live{id: "k1", masked: 1, maskedBytes: c.before}
			err := p.maskCellEnv(lv, map[string]string{"V": "eightbyt"})
			if c.ok {
				if err != nil || lv.masked != 2 || lv.maskedBytes != mib || !slices.Contains(lv.secrets, "eightbyt") {
					t.Fatalf("%v; masked %d values, %d bytes, secrets %q", err, lv.masked, lv.maskedBytes, lv.secrets)
				}
				return
			}
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "masks 1048569 bytes of env values already, the limit is 1048576") {
				t.Fatalf("%v, want the bytes bound", err)
			}
			if lv.masked != 1 || lv.maskedBytes != mib-7 || len(lv.secrets) != 0 {
				t.Fatalf("a refused value counted: %d values, %d bytes, secrets %q", lv.masked, lv.maskedBytes, lv.secrets)
			}
		})
	}
}
