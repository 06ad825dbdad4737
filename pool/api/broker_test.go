//go:build unix

package api_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// A streamed cell's tool call over the network is answered by the
// principal whose cell made it, or by an admin (on the network or the
// Unix socket); another owner's credential finds no such call (404), and
// the call stays pending for the right answer.
func TestToolCallAnswerers(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	creds := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte("alice-token")): {Name: "alice", Owners: []string{"alice"}},
		sha256.Sum256([]byte("bob-token")):   {Name: "bob", Owners: []string{"bob"}},
		sha256.Sum256([]byte("ops-token")):   {Name: "ops", Admin: true},
	}}
	client := networkClients(t, d, creds)
	alice, bob, ops := client("alice-token"), client("bob-token"), client("ops-token")
	ctx := testCtx(t)
	for _, tc := range []struct {
		name     string
		answerer *api.Client
	}{{"its own principal", alice}, {"a network admin", ops}, {"the socket's admin", d.client}} {
		answered := make(chan error, 2)
		h := pool.ToolHandlerFunc(func(hctx context.Context, call pool.ToolCall) (string, error) {
			other := "bob's"
			answered <- bob.AnswerToolCall(ctx, call.ID, api.ToolAnswer{Result: &other})
			result := tc.name
			answered <- tc.answerer.AnswerToolCall(ctx, call.ID, api.ToolAnswer{Result: &result})
			<-hctx.Done() // the answers above decide the call
			return "", hctx.Err()
		})
		res, err := alice.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"echo"},
			Code: "import kernpool_tools as t\nprint(t.echo())"}, h)
		if err != nil || res.Output != tc.name+"\n" {
			t.Fatalf("%s: result %+v, %v; want the answerer's output", tc.name, res, err)
		}
		if err := recv(t, "bob's answer", answered); !errors.Is(err, pool.ErrNotFound) {
			t.Errorf("%s: bob's answer to alice's call: %v, want not found", tc.name, err)
		}
		if err := recv(t, "the answer", answered); err != nil {
			t.Errorf("%s: the answer: %v", tc.name, err)
		}
	}
}
