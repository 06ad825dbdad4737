package pool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/kernpool/kernpool/units"
)

// UnmarshalJSON reads limits as the config file writes them: memory_max
// as bytes or a size string ("64MiB", "1GB"), pids_max as an integer,
// cpu_max as a number of cores. Unknown members are refused. Errors wrap
// ErrBadRequest and name the field.
func (l *Limits) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*l = Limits{}
		return nil
	}
	var raw map[string]json.RawMessage
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &raw) != nil {
		return fmt.Errorf("%w: field \"limits\": expected an object", ErrBadRequest)
	}
	var out Limits
	for name, v := range raw {
		var err error
		switch name {
		case "memory_max":
			out.MemoryMax, err = sizeValue(v)
		case "pids_max":
			out.PidsMax, err = strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		case "cpu_max":
			out.CPUMax, err = strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
			if err == nil && (math.IsNaN(out.CPUMax) || math.IsInf(out.CPUMax, 0)) {
				err = strconv.ErrRange
			}
		default:
			return fmt.Errorf("%w: field \"limits\": unknown member %q (known: cpu_max, memory_max, pids_max)", ErrBadRequest, name)
		}
		if err != nil {
			return fmt.Errorf("%w: field \"limits.%s\": %s, got %s", ErrBadRequest, name, limitWant[name], shortJSON(v))
		}
		if out.MemoryMax < 0 || out.PidsMax < 0 || out.CPUMax < 0 {
			return fmt.Errorf("%w: field \"limits.%s\" must not be negative", ErrBadRequest, name)
		}
	}
	*l = out
	return nil
}

// limitWant says what each limits member takes.
var limitWant = map[string]string{
	"memory_max": `expected bytes or a size such as "64MiB"`,
	"pids_max":   "expected an integer",
	"cpu_max":    "expected a number of cores",
}

// sizeValue reads an integer number of bytes or a size string.
func sizeValue(v json.RawMessage) (int64, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, err
		}
		return units.ParseSize(s)
	}
	return strconv.ParseInt(string(v), 10, 64)
}

func shortJSON(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// checkCeiling refuses limits over the operator's ceiling (a zero ceiling
// field bounds nothing), naming the field and the ceiling.
func checkCeiling(l, ceiling Limits) error {
	over := func(field, got, limit string) error {
		return fmt.Errorf("limits.%s %s is over the ceiling of %s: %w", field, got, limit, ErrBadRequest)
	}
	switch {
	case ceiling.MemoryMax > 0 && l.MemoryMax > ceiling.MemoryMax:
		return over("memory_max", units.FormatBytes(l.MemoryMax), units.FormatBytes(ceiling.MemoryMax))
	case ceiling.PidsMax > 0 && l.PidsMax > ceiling.PidsMax:
		return over("pids_max", strconv.FormatInt(l.PidsMax, 10), strconv.FormatInt(ceiling.PidsMax, 10))
	case ceiling.CPUMax > 0 && l.CPUMax > ceiling.CPUMax:
		return over("cpu_max", strconv.FormatFloat(l.CPUMax, 'g', -1, 64), strconv.FormatFloat(ceiling.CPUMax, 'g', -1, 64))
	}
	return nil
}

// conflict says why rq cannot run on the live kernel lv without a reset:
// it asks for limits or passthrough names other than lv's (a request that
// names none accepts the kernel's). "" when it can.
func conflict(rq normalized, lv *live) string {
	if rq.limits != (Limits{}) && rq.limits != lv.limits {
		return fmt.Sprintf("the request's limits %+v differ from those of the live kernel %s (%+v)", rq.limits, lv.id, lv.limits)
	}
	if len(rq.passthrough) > 0 && !slices.Equal(rq.passthrough, lv.passthrough) {
		return fmt.Sprintf("the request's passthrough %v differs from that of the live kernel %s (%v)", rq.passthrough, lv.id, lv.passthrough)
	}
	return ""
}
