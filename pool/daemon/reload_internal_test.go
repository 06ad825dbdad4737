package daemon

import (
	"slices"
	"testing"
	"time"
)

// TestDiffConfigNamesConfigKeys: a reload that cannot apply a setting
// names it as the config file does, once, not by its Go field.
func TestDiffConfigNamesConfigKeys(t *testing.T) {
	old := &Config{Socket: "/a.sock", IdleTimeout: time.Minute, LogJSON: false}
	next := *old
	next.Socket, next.IdleTimeout, next.LogJSON = "/b.sock", time.Hour, true
	next.Audit.Path = "/var/log/kernpool/audit.log"
	next.Users.UIDFirst, next.Users.UIDLast = 1000, 2000
	next.Cgroup.Parent, next.Cgroup.Enabled = "kp", true
	next.Checkpoints.Retention = time.Hour
	next.MaxKernelsPerOwner = 3 // reloadable: not in restart
	_, restart, _ := diffConfig(old, &next, false)
	want := []string{"socket", "log_json", "idle_timeout", "audit_log", "cgroup.parent", "cgroup.enabled", "users.uid_range", "checkpoint_retention"}
	if !slices.Equal(restart, want) {
		t.Fatalf("restart = %q, want %q", restart, want)
	}
}
