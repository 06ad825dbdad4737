package daemon

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kernpool/kernpool/units"
)

// ParseSize is units.ParseSize with the config's error sentinel.
func ParseSize(s string) (int64, error) {
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return n, nil
}

// ParseDuration parses a Go duration ("30s", "5m", "1h30m") or a plain
// number of seconds ("90", "1.5").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		// >=: the largest float below the bound is the last one whose
		// nanoseconds fit an int64 (the bound itself wraps negative).
		if f < 0 || f >= math.MaxInt64/float64(time.Second) {
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
