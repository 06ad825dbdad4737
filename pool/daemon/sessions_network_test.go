package daemon_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestNetworkSessionsAreOwnerBound: over the network API, two owners'
// sessions are live at once and neither credential can use, see, end or
// restart the other's, nor reach its files (404, as for a session that
// does not exist), while the owner's upload by session is read by the
// session's next cell; the admin sees both. The daemon's envscrub wiring masks a planted env value
// in a session's output and refuses a secret-shaped name.
func TestNetworkSessionsAreOwnerBound(t *testing.T) {
	cfg, ca := netConfig(t)
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	alice, admin := n.client(t, aliceToken, ""), n.client(t, adminToken, "")
	bob := n.client(t, "", "bob-gateway")
	const planted = "planted-value-0123456789"
	as, err := alice.CreateSession(ctx, pool.SessionSpec{Owner: "alice", Env: map[string]string{"PLANTED": planted}})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := bob.CreateSession(ctx, pool.SessionSpec{Owner: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateSession(ctx, pool.SessionSpec{Owner: "bob"}); apiCode(err) != api.CodeForbidden {
		t.Fatalf("alice creating a session for bob: %v, want forbidden", err)
	}
	res, err := alice.Execute(ctx, pool.Request{Session: as.ID, Code: "import os\nsecret = os.environ['PLANTED']\nprint(secret == '" + planted + "', secret)"})
	if err != nil || res.Output != "True ***\n" {
		t.Fatalf("alice's cell: %+v, %v", res, err)
	}
	if _, err := bob.Execute(ctx, pool.Request{Session: bs.ID, Code: "y = 2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.UploadFile(ctx, api.FileTarget{Session: as.ID}, "from-alice.txt", strings.NewReader("alice"), 5); err != nil {
		t.Fatalf("alice's upload by session: %v", err)
	}
	for name, call := range map[string]func() error{
		"execute": func() error {
			_, err := bob.Execute(ctx, pool.Request{Session: as.ID, Code: "print(secret)"})
			return err
		},
		"execute as alice": func() error {
			_, err := bob.Execute(ctx, pool.Request{Session: as.ID, Owner: "alice", Code: "print(secret)"})
			return err
		},
		"get":        func() error { _, err := bob.Session(ctx, as.ID); return err },
		"variables":  func() error { _, err := bob.SessionVariables(ctx, as.ID); return err },
		"interrupt":  func() error { return bob.InterruptSession(ctx, as.ID) },
		"restart":    func() error { _, err := bob.RestartSession(ctx, as.ID); return err },
		"delete":     func() error { return bob.DeleteSession(ctx, as.ID) },
		"files list": func() error { _, err := bob.ListFiles(ctx, api.FileTarget{Session: as.ID}, ""); return err },
		"upload": func() error {
			_, err := bob.UploadFile(ctx, api.FileTarget{Session: as.ID}, "from-bob.txt", strings.NewReader("bob"), 3)
			return err
		},
		"download": func() error {
			_, err := bob.DownloadFile(ctx, api.FileTarget{Session: as.ID}, "from-alice.txt", io.Discard)
			return err
		},
		"file delete": func() error { return bob.DeleteFile(ctx, api.FileTarget{Session: as.ID}, "from-alice.txt") },
	} {
		if err := call(); apiCode(err) != api.CodeNotFound || !strings.Contains(err.Error(), "no such session") {
			t.Errorf("bob's %s on alice's session: %v, want not_found", name, err)
		}
	}
	ids := func(c *api.Client) string {
		t.Helper()
		list, err := c.Sessions(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			out = append(out, s.Owner)
		}
		return strings.Join(out, ",")
	}
	if got := ids(alice); got != "alice" {
		t.Errorf("alice lists sessions of %q", got)
	}
	if got := ids(bob); got != "bob" {
		t.Errorf("bob lists sessions of %q", got)
	}
	if got := ids(admin); got != "alice,bob" {
		t.Errorf("the admin lists sessions of %q", got)
	}
	// Alice's upload is read by her session's next cell; bob's refused
	// calls wrote and deleted nothing.
	res, err = alice.Execute(ctx, pool.Request{Session: as.ID, Code: "import os\nprint(open('from-alice.txt').read(), os.path.exists('from-bob.txt'))"})
	if err != nil || res.Output != "alice False\n" {
		t.Fatalf("alice's cell after the uploads: %+v, %v", res, err)
	}
	v, err := alice.SessionVariables(ctx, as.ID)
	if err != nil || len(v.Variables) != 2 || v.Variables[1].Name != "secret" || v.Variables[1].Repr != "'***'" {
		t.Fatalf("alice's variables: %+v, %v", v, err)
	}
	// A secret-shaped name is refused unless the profile passes it through.
	_, err = alice.Execute(ctx, pool.Request{Session: as.ID, Env: map[string]string{"SERVICE_TOKEN": "x"}, Code: "1"})
	if apiCode(err) != api.CodeBadRequest || !strings.Contains(err.Error(), `"SERVICE_TOKEN" refused`) {
		t.Fatalf("a secret-shaped env name: %v", err)
	}
	if err := alice.DeleteSession(ctx, as.ID); err != nil {
		t.Fatal(err)
	}
}
