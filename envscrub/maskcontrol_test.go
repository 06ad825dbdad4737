package envscrub

import "testing"

// The controls a mask never echoes, at both ends of each range.
func TestMaskControlRangeEnds(t *testing.T) {
	stripped := []rune{0x00, 0x1f, 0x7f, 0x80, 0x9f, 0x200b, 0x200f, 0x202a, 0x202e, 0x2060, 0x2064}
	kept := []rune{0x20, 0x7e, 0xa0, 0x200a, 0x2010, 0x2029, 0x202f, 0x205f, 0x2065}
	for _, r := range stripped {
		if !maskControl(r) {
			t.Errorf("maskControl(%U) = false, want true", r)
		}
	}
	for _, r := range kept {
		if maskControl(r) {
			t.Errorf("maskControl(%U) = true, want false", r)
		}
	}
}
