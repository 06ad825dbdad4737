//go:build unix

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// The state dir follows the socket, as --help says: $KERNPOOL_SOCKET and
// a configured socket both move it.
func TestStateDirFollowsTheSocket(t *testing.T) {
	env := map[string]string{"KERNPOOL_SOCKET": "/srv/kp/api.sock"}
	getenv := func(k string) string { return env[k] }
	if got := DefaultStateDir(getenv); got != "/srv/kp/state" {
		t.Errorf("DefaultStateDir with $KERNPOOL_SOCKET = %q, want /srv/kp/state", got)
	}
	c := DefaultConfig()
	c.Socket = "/srv/other/kp.sock"
	if err := c.Complete(getenv); err != nil {
		t.Fatal(err)
	}
	if c.StateDir != "/srv/other/state" {
		t.Errorf("state dir with socket %s = %q, want /srv/other/state", c.Socket, c.StateDir)
	}
}

// A socket dir kernpool made 0700 earlier (as creating /run/kernpool/uids
// first once did) is made searchable, so serve starts; a dir holding
// anything else is left as it is; a state dir that is a symlink is refused.
func TestPrepareDirsFixesItsOwnSocketDir(t *testing.T) {
	for _, c := range []struct {
		name    string
		extra   string
		state   bool // the state dir is there already (a daemon ran)
		wantMod os.FileMode
	}{
		{"kernpool's own", "", false, 0o711},
		{"kernpool's own, after a run", "kernpool.sock", true, 0o711},
		{"someone else's", "notes.txt", false, 0o700},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "kernpool")
			if err := os.MkdirAll(filepath.Join(base, "uids"), 0o700); err != nil {
				t.Fatal(err)
			}
			if c.extra != "" {
				if err := os.WriteFile(filepath.Join(base, c.extra), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if c.state {
				if err := os.Mkdir(filepath.Join(base, "state"), 0o711); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(base, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Socket: filepath.Join(base, "kernpool.sock"), StateDir: filepath.Join(base, "state")}
			if err := prepareDirs(cfg, hclog.NewNullLogger()); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(base)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != c.wantMod {
				t.Errorf("socket dir mode %04o, want %04o", fi.Mode().Perm(), c.wantMod)
			}
		})
	}
	t.Run("state dir symlink", func(t *testing.T) {
		base := t.TempDir()
		if err := os.Symlink(t.TempDir(), filepath.Join(base, "state")); err != nil {
			t.Fatal(err)
		}
		cfg := &Config{Socket: filepath.Join(base, "kernpool.sock"), StateDir: filepath.Join(base, "state")}
		if err := prepareDirs(cfg, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "not a directory of this daemon's user") {
			t.Errorf("prepareDirs with a symlinked state dir: %v", err)
		}
	})
	t.Run("state dir below a file", func(t *testing.T) {
		base := t.TempDir()
		if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := &Config{Socket: filepath.Join(base, "kernpool.sock"), StateDir: filepath.Join(base, "file", "state")}
		if err := prepareDirs(cfg, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "state dir: ") {
			t.Errorf("prepareDirs with a state dir below a file: %v", err)
		}
	})
}
