package units

import (
	"errors"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"64MiB", 64 << 20, true}, {"1GiB", 1 << 30, true}, {"512M", 512 << 20, true},
		{"1GB", 1_000_000_000, true}, {"1048576", 1 << 20, true}, {" 2 KiB ", 2048, true},
		{"max", 0, true}, {"", 0, true}, {"0", 0, true}, {"1.5KiB", 1536, true},
		{"-1", 0, false}, {"lots", 0, false}, {"64XB", 0, false}, {"9999999TiB", 0, false}, {"NaN", 0, false},
		// Zero with a unit is unlimited too, as a bare 0 is.
		{"0MiB", 0, true}, {"0.0", 0, true},
		// The cap (2^62 bytes: room to double without overflow) and one
		// float step past it.
		{"4611686018427387904", 1 << 62, true}, {"4611686018427389952", 0, false},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%t", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrSize) {
			t.Errorf("ParseSize(%q) error %v does not wrap ErrSize", c.in, err)
		}
	}
}

// TestFormatBytesInvertsParseSize: FormatBytes writes the largest exact
// binary unit, and ParseSize reads every answer back.
func TestFormatBytesInvertsParseSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "unlimited"}, {-1, "unlimited"}, {1, "1B"}, {1000, "1000B"}, {1024, "1KiB"},
		{64 << 20, "64MiB"}, {1536 << 10, "1536KiB"}, {3 << 30, "3GiB"}, {5 << 40, "5TiB"}, {2048 << 40, "2048TiB"},
	} {
		got := FormatBytes(tc.n)
		if got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if tc.n <= 0 {
			continue
		}
		if back, err := ParseSize(got); err != nil || back != tc.n {
			t.Errorf("ParseSize(FormatBytes(%d) = %q) = %d, %v", tc.n, got, back, err)
		}
	}
}
