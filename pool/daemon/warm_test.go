package daemon

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestWarmConfig: spares and preload per profile (default 2, none), their
// validation with the file:line, the digest a reload compares, and no
// spares with per-owner uids.
func TestWarmConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
profile "default" {
  preload = ["json", "email.mime"]
}
profile "big" {
  spares     = 5
  memory_max = "1GiB"
}
`), "w.hcl")
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Warm()
	if d := w["default"]; d.Spares != 2 || !slices.Equal(d.Preload, []string{"json", "email.mime"}) {
		t.Fatalf("default warm = %+v", d)
	}
	if b := w["big"]; b.Spares != 5 || len(b.Preload) != 0 || b.Profile == w["default"].Profile {
		t.Fatalf("big warm = %+v (default digest %q)", b, w["default"].Profile)
	}
	// The digest follows the profile's settings, not its spares or preload.
	p := cfg.Profiles["big"]
	p.Spares, p.Preload = 1, []string{"decimal"}
	cfg.Profiles["big"] = p
	if cfg.Warm()["big"].Profile != w["big"].Profile {
		t.Fatal("the profile digest changed with spares and preload")
	}
	p.PidsMax++
	cfg.Profiles["big"] = p
	if cfg.Warm()["big"].Profile == w["big"].Profile {
		t.Fatal("the profile digest did not change with pids_max")
	}
	cfg.Users.PerOwner = true
	if cfg.Warm()["big"].Spares != 0 {
		t.Fatal("spares with per-owner uids")
	}
	for src, want := range map[string]string{
		`profile "default" { spares = -1 }`:                "spares must not be negative",
		`profile "default" { preload = ["os; import x"] }`: `preload "os; import x" is not a module name`,
	} {
		_, err := ParseConfig([]byte(src), "bad.hcl")
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}
