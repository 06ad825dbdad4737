package daemon

import (
	"testing"
)

// netPrefix makes client_cert blocks valid: they need a TLS listener with
// a client CA (the files are read by New, not by the parser).
const netPrefix = `listen = "10.0.0.5:8443"
tls_cert = "/etc/kp/node.pem"
tls_key = "/etc/kp/node-key.pem"
tls_client_ca = "/etc/kp/ca.pem"
`

// TestConfigKeyBounds: config keys at their limit and one past it, and
// what the parser makes of each (docs/config.md).
func TestConfigKeyBounds(t *testing.T) {
	tests := []configCase{
		// users.uid_range is FIRST-LAST with 0 < FIRST <= LAST.
		{name: "uid_range of one uid", src: "users {\n  uid_range = \"1-1\"\n}\n", check: func(t *testing.T, c *Config) {
			if c.Users.UIDFirst != 1 || c.Users.UIDLast != 1 {
				t.Errorf("uid_range 1-1 parsed as %d-%d", c.Users.UIDFirst, c.Users.UIDLast)
			}
		}},
		{name: "uid_range from uid 0", src: "users {\n  uid_range = \"0-10\"\n}\n", err: []string{"test.hcl:2", "uid_range", `"0-10"`}},
		{name: "uid_range one below its first", src: "users {\n  uid_range = \"70001-70000\"\n}\n", err: []string{"test.hcl:2", "uid_range", `"70001-70000"`}},
		// client_cert: admin = true makes an admin; no admin key, a scoped one.
		{name: "client_cert admin and not", src: netPrefix + `client_cert "router.internal" {
  admin = true
}
client_cert "gw.internal" {
  owners = ["bob"]
}
client_cert "off.internal" {
  admin = false
  owner_prefixes = ["acme/"]
}
`, check: func(t *testing.T, c *Config) {
			cc := c.Network.ClientCerts
			if len(cc) != 3 || cc[0].Name != "router.internal" || !cc[0].Admin ||
				cc[1].Name != "gw.internal" || cc[1].Admin || len(cc[1].Owners) != 1 || cc[1].Owners[0] != "bob" ||
				cc[2].Admin || len(cc[2].OwnerPrefixes) != 1 || cc[2].OwnerPrefixes[0] != "acme/" {
				t.Errorf("client_certs = %+v", cc)
			}
		}},
	}
	runConfigCases(t, tests)
}
