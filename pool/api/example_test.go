//go:build linux

// The examples run a real daemon (package pool/daemon) with real python3
// kernels (CI: Linux, root, so they are sandboxed); other platforms only
// compile them.

package api_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	kpdaemon "github.com/kernpool/kernpool/pool/daemon" // this package's tests have a type named daemon
)

// exampleDaemon starts a daemon as `kernpool serve` would and returns its
// socket and how to stop it.
func exampleDaemon() (socket string, stop func()) {
	dir, _ := os.MkdirTemp("", "kpexample")
	_ = os.Chmod(dir, 0o711) // kernel uids traverse it to their staging dirs
	cfg := kpdaemon.DefaultConfig()
	cfg.Socket, cfg.StateDir = filepath.Join(dir, "kp.sock"), filepath.Join(dir, "state")
	cfg.Interpreter = "/usr/bin/python3"
	cfg.Cgroup.Parent = "kernpool-example-" + filepath.Base(dir)
	if os.Geteuid() != 0 {
		cfg.Isolation = kernel.IsolationProcess // not root: no sandbox
	}
	d, err := kpdaemon.New(context.Background(), cfg, kpdaemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		panic(err)
	}
	ln, err := d.Listen()
	if err != nil {
		panic(err)
	}
	go d.Serve(ln)
	return cfg.Socket, func() { _ = d.Shutdown(context.Background()); _ = os.RemoveAll(dir) }
}

// A client runs cells in an owner's kernel: its variables live on from
// one call to the next; a cell that raises is a result, not an error.
func ExampleClient_Execute() {
	socket, stop := exampleDaemon()
	defer stop()
	ctx := context.Background()

	c := api.NewClient(socket) // "" would mean $KERNPOOL_SOCKET or the default path
	defer c.CloseIdleConnections()
	for _, code := range []string{"import math\nr = 2", "print(round(math.pi * r ** 2, 2))", "1/0"} {
		res, err := c.Execute(ctx, pool.Request{Owner: "alice", Code: code})
		if err != nil {
			fmt.Println("no result:", err)
			return
		}
		out := strings.TrimSpace(res.Output)
		if res.Status != pool.StatusSuccess { // a traceback: its last line
			out = out[strings.LastIndex(out, "\n")+1:]
		}
		fmt.Printf("%s %q\n", res.Status, out)
	}
	// Output:
	// success ""
	// success "12.57"
	// error "ZeroDivisionError: division by zero"
}

// A cell calls the gateway's tools through `import kernpool_tools`; the
// streaming client answers each call with the handler's result.
func ExampleClient_ExecuteStream() {
	socket, stop := exampleDaemon()
	defer stop()
	ctx := context.Background()

	c := api.NewClient(socket)
	defer c.CloseIdleConnections()
	weather := pool.ToolHandlerFunc(func(_ context.Context, call pool.ToolCall) (string, error) {
		return fmt.Sprintf(`{"tool": %q, "temp": 21}`, call.Tool), nil
	})
	res, err := c.ExecuteStream(ctx, pool.Request{
		Owner: "bob", Tools: []string{"weather"},
		Code: "import kernpool_tools as t\nprint(t.weather(city='Oslo')['temp'])",
	}, weather)
	if err != nil {
		fmt.Println("no result:", err)
		return
	}
	fmt.Print(res.Output, res.ToolCallsMade, "\n")
	// Output:
	// 21
	// 1
}
