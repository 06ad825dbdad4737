//go:build unix

package daemon_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestSocketGroup: socket_group (a gid or a group name) gives the API
// socket to that group, mode 0660, so its members may use the daemon; a
// group that does not exist stops Listen naming socket_group.
func TestSocketGroup(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		group   string
		wantGID uint32
		err     string
	}{
		{group: "4242", wantGID: 4242},
		{group: "root", wantGID: 0}, // a name: gid 0 on every Linux
		{group: "kp-no-such-group", err: "socket_group: "},
	} {
		t.Run(tc.group, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.SocketGroup = tc.group
			ctx := context.Background()
			d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Shutdown(ctx) }()
			ln, err := d.Listen()
			if tc.err != "" {
				if err == nil {
					_ = ln.Close()
					t.Fatalf("Listen with socket_group %q succeeded", tc.group)
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Listen: %v, want it to name %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			fi, err := os.Stat(cfg.Socket)
			if err != nil {
				t.Fatal(err)
			}
			// The owner stays the daemon's uid: only the group changes.
			if st := fi.Sys().(*syscall.Stat_t); st.Gid != tc.wantGID || st.Uid != uint32(os.Geteuid()) || fi.Mode().Perm() != 0o660 {
				t.Errorf("socket uid %d gid %d mode %04o, want uid %d gid %d mode 0660", st.Uid, st.Gid, fi.Mode().Perm(), os.Geteuid(), tc.wantGID)
			}
		})
	}
}
