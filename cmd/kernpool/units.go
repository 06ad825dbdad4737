package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

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
// plain number of bytes. "0", "" and "max" mean unlimited (0).
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
		return 0, fmt.Errorf("%w: %q is not a size (examples: 64MiB, 1GiB, 1048576)", ErrConfig, s)
	}
	v := f * float64(mult)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%w: size %q is too large", ErrConfig, s)
	}
	return int64(v), nil
}

// ParseDuration parses a Go duration ("30s", "5m", "1h30m") or a plain
// number of seconds ("90", "1.5").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if f < 0 || f > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("%w: duration %q is out of range", ErrConfig, s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a duration (examples: 30s, 5m, 1h)", ErrConfig, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%w: duration %q is negative", ErrConfig, s)
	}
	return d, nil
}
