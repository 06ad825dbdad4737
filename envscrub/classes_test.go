package envscrub

import (
	"strings"
	"testing"
)

// TestByteClasses holds every byte of the matchers' class table against
// the sets its comments name, spelled out here letter by letter.
func TestByteClasses(t *testing.T) {
	const (
		upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		lower = "abcdefghijklmnopqrstuvwxyz"
		digit = "0123456789"
	)
	sets := []struct {
		name string
		cl   uint16
		set  string
	}{
		{"word", clWord, upper + lower + digit + "_-"},
		{"alnum", clAlnum, upper + lower + digit},
		{"upperdig", clUpperDig, upper + digit},
		{"digit", clDigit, digit},
		{"lowerhex", clLowerHex, digit + "abcdef"},
		{"space", clSpace, " \t\n\v\f\r"},
		{"namechar", clNameChar, upper + lower + digit + "_"},
		{"fernet", clFernet, upper + lower + digit + "_=-"},
		{"telegram", clTelegram, upper + lower + digit + "_-"},
		{"scheme", clSchemeChr, upper + lower + digit + "+.-"},
		{"dash", clDash, "-"},
		{"dot", clDot, "."},
		{"tokfirst", clTokFirst, digit + "abcdef" + "sgxAprfbSahndtemGRk"},
	}
	for _, s := range sets {
		for c := 0; c < 256; c++ {
			want := c < 128 && strings.IndexByte(s.set, byte(c)) >= 0
			if got := is(byte(c), s.cl); got != want {
				t.Errorf("is(%q, %s) = %v, want %v", byte(c), s.name, got, want)
			}
		}
	}
}

// The credential-shape tests at their length and class limits.
func TestValueShapeLimits(t *testing.T) {
	for v, want := range map[string]bool{
		"0123456789012345":     true,  // 16 hex digits
		"012345678901234":      false, // 15, one class
		"abcdefghijklmnopqrst": true,  // 20 of the token set
		"abcdefghijklmnopqrs":  false, // 19, one class
		"abcdefghijk1":         true,  // 12, two classes
		"abcdefghij1":          false, // 11
		"abcdefghijkl":         false, // 12, one class
		"abcdefghijklmnopqrs!": false, // 20, one class, a byte off the set
	} {
		if got := looksOpaque(v); got != want {
			t.Errorf("looksOpaque(%q) = %v, want %v", v, got, want)
		}
	}
	for v, want := range map[string]bool{
		"/home/u/abcdefghijKLM123":    false, // a 16-character three-class segment
		"/home/u/abcdefghiKLM123":     true,  // 15
		"/a/abcdefghijklmnop1234":     true,  // two classes
		"/a/ABCDEFGHIJKLMNOP1234":     true,
		"/x/abcdefghijKLM123.txt":     true, // a file name
		"~/abcdefghijKLM123":          false,
		"~/plain/dir":                 true,
		"relative/abcdefghijKLM123/x": false, // not a path at all
		"relative/dir":                false,
	} {
		if got := isPlainPath(v); got != want {
			t.Errorf("isPlainPath(%q) = %v, want %v", v, got, want)
		}
	}
	for v, want := range map[string]int{
		"": 0, "a": 1, "z": 1, "A": 1, "Z": 1, "0": 1, "9": 1, "`{@[/:": 0,
		"a9": 2, "Z0": 2, "aZ": 2, "azAZ09": 3, "zA9": 3,
	} {
		if got := classCount(v); got != want {
			t.Errorf("classCount(%q) = %d, want %d", v, got, want)
		}
	}
}
