package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSize: the text is not a size this package reads.
var ErrSize = errors.New("not a size")

// sizeUnits are the suffixes ParseSize accepts, longest first so that
// "MiB" is tried before "B". Binary and decimal units mean what they say.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize parses "64MiB", "1GiB", "512M" (binary), "1GB" (decimal) or a
// plain number of bytes. "0", "" and "max" mean unlimited (0). Errors
// wrap ErrSize.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" || t == "0" || strings.EqualFold(t, "max") {
		return 0, nil
	}
	mult := int64(1)
	num := t
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is %w (examples: 64MiB, 1GiB, 1048576)", s, ErrSize)
	}
	v := f * float64(mult)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large: %w", s, ErrSize)
	}
	return int64(v), nil
}

// FormatBytes renders a byte count the way operators write limits
// ("64MiB"), in the largest binary unit that divides it exactly; 0 or less
// is "unlimited". ParseSize reads every answer back to n.
func FormatBytes(n int64) string {
	const unit = 1024
	if n <= 0 {
		return "unlimited"
	}
	suffixes := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := n, 0
	for v%unit == 0 && v >= unit && i < len(suffixes)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%d%s", v, suffixes[i])
}
