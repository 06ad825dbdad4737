package kernel

import "unsafe"

// unsafeString views b as a string without copying. The caller must never
// modify b afterwards (fieldBuf drops its buffer once it returns).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
