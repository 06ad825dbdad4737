package kernel

import (
	"strings"
	"testing"
)

// ValidModuleName against names written out by hand: the length limit,
// digits at the ends of their range leading a part, and each end of the
// identifier ranges after a first letter, with its outside neighbour.
func TestValidModuleNameEdges(t *testing.T) {
	long := strings.Repeat("a", 256)
	cases := []struct {
		name string
		ok   bool
	}{
		{"email.mime.text", true},
		{"_private", true},
		{"A_Z.a9", true},
		{"az09AZ.z0", true},
		{long, true},
		{long + "a", false},
		{"", false},
		{"0x", false},
		{"9x", false},
		{"a.0b", false},
		{"a-b", false},
		{"a/", false},
		{"a:", false},
		{"a@", false},
		{"a[", false},
		{"a`", false},
		{"a{", false},
		{"a..b", false},
		{".a", false},
		{"a.", false},
		{"é", false},
	}
	for _, c := range cases {
		if got := ValidModuleName(c.name); got != c.ok {
			t.Errorf("ValidModuleName(%.20q) = %v, want %v", c.name, got, c.ok)
		}
	}
}
