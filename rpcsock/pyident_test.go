package rpcsock

import "testing"

// TestPyIdentAtCharacterRangeEnds: each end of the kept ranges (a-z, A-Z,
// 0-9) stays as it is, and the character just outside each end becomes
// "_" (doc comment of PyIdent): a tool named with a range's last letter
// keeps its function name, and no other ASCII character reaches the
// generated Python source.
func TestPyIdentAtCharacterRangeEnds(t *testing.T) {
	cases := []struct{ tool, want string }{
		{"a", "a"}, {"z", "z"}, {"A", "A"}, {"Z", "Z"},
		{"x0", "x0"}, {"x9", "x9"}, {"x_y", "x_y"},
		{"zaZA", "zaZA"}, {"q09", "q09"},
		{"x`", "x_"}, {"x{", "x_"}, {"x@", "x_"}, {"x[", "x_"}, {"x/", "x_"}, {"x:", "x_"},
		{"x^", "x_"}, {"x\x7f", "x_"},
		// Leading digits at both ends, and a leading character outside
		// them, get the prefix.
		{"0x", "tool_0x"}, {"9x", "tool_9x"}, {"/x", "tool__x"}, {":x", "tool__x"},
	}
	for _, c := range cases {
		if got := PyIdent(c.tool); got != c.want {
			t.Errorf("PyIdent(%q) = %q, want %q", c.tool, got, c.want)
		}
	}
}
