package envscrub

import "testing"

// TestPEMBlocksAfterTheFirst: what the first block finds decides how the
// later ones are cut. Once no END line follows a BEGIN, none follows a
// later one either, so every later block is masked through its base64
// body; while END lines come, each block stops at its own, and the text
// after it stays. The label is [A-Z ]*, 'Z' included. (gremlins: the
// unterminated second key came out as its own text, a terminated second
// key, or one whose END line follows its BEGIN line at once, took the
// line after it, and a label with a 'Z' was not a key.)
func TestPEMBlocksAfterTheFirst(t *testing.T) {
	const (
		rsa   = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc+/=\n-----END RSA PRIVATE KEY-----"
		openA = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc+/="
		openB = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIGx0secondkeybody\nQ29uZmlk"
		mask  = "[REDACTED PRIVATE KEY]"
	)
	runRedact(t, []redactCase{
		{"two unterminated keys", openA + "\n\nbetween\n" + openB + "\n\nafter",
			mask + "\n\nbetween\n" + mask + "\n\nafter"},
		{"three unterminated keys", openA + "\n\n" + openB + "\n\n" + openA + "\n\nend",
			mask + "\n\n" + mask + "\n\n" + mask + "\n\nend"},
		{"a second key keeps the line after its end", rsa + "\n" + rsa + "\nhello world",
			mask + "\n" + mask + "\nhello world"},
		{"an END line glued to its BEGIN line", "-----BEGIN PRIVATE KEY----------END PRIVATE KEY-----\nhello world",
			mask + "\nhello world"},
		{"a label with a Z", "-----BEGIN ZETA PRIVATE KEY-----\nMIIB\n-----END ZETA PRIVATE KEY-----\nok",
			mask + "\nok"},
	})
}

// TestJWTSegments: eyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_=-]{4,}){0,2}:
// ten head characters or more, then at most two dot segments, each of
// four characters or more. (gremlins: a head of exactly 10 was left, a
// third segment was taken, a segment of exactly 4 was left, and one of
// 3 was taken.)
func TestJWTSegments(t *testing.T) {
	const head = "eyJhbGciOiJIUzI1NiJ9" // 20 characters
	runRedact(t, []redactCase{
		{"a head of exactly 10 is taken", "eyJhbGciOiJIU rest", "*** rest"},
		{"a head of 9 is kept", "eyJhbGciOiJI rest", "eyJhbGciOiJI rest"},
		{"a third segment is kept", head + ".eyJzdWIiOiIxIn0.dozjgNry.abcd", "eyJhbG...gNry.abcd"},
		{"a segment of exactly 4 is taken", head + ".abcd rest", "eyJhbG...abcd rest"},
		{"a second segment of exactly 4 is taken", head + ".wxyz.abcd rest", "eyJhbG...abcd rest"},
		{"a segment of 3 is kept", head + ".abc rest", "eyJhbG...NiJ9.abc rest"},
		{"a second segment of 3 is kept", head + ".wxyz.abc rest", "eyJhbG...wxyz.abc rest"},
	})
}
