//go:build linux

// The examples run a real daemon with real python3 kernels (CI: Linux,
// root, so they are sandboxed); other platforms only compile them.

package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// exampleConfig is the config of an example daemon living in dir.
func exampleConfig(dir string) *daemon.Config {
	cfg := daemon.DefaultConfig()
	cfg.Socket = filepath.Join(dir, "kernpool.sock")
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Interpreter = "/usr/bin/python3"
	// A parent cgroup of its own: a daemon sweeps its parent's leftovers.
	cfg.Cgroup.Parent = "kernpool-example-" + filepath.Base(dir)
	if os.Geteuid() != 0 {
		// Not root, no kernel can get a uid of its own, and the sandbox
		// refuses to start: accept the degraded mode explicitly.
		cfg.Isolation = kernel.IsolationProcess
	}
	return cfg
}

// A Go gateway embeds the daemon kernpool serve runs: New builds the
// sandboxed pool (and fails closed), Serve serves the HTTP API on its
// socket, Shutdown drains it. The program's main must call kinit.Main()
// first (this test binary's TestMain does): a kernel's init step is the
// running binary re-executed.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "kpexample")
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o711) // kernel uids traverse it to their staging dirs

	cfg := exampleConfig(dir)
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()), daemon.WithVersion("v1.0.0", "example"))
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	defer d.Shutdown(ctx)
	ln, err := d.Listen()
	if err != nil {
		fmt.Println(err)
		return
	}
	go d.Serve(ln)

	// Any client of the API now reaches it: here the Go client.
	c := api.NewClient(cfg.Socket)
	defer c.CloseIdleConnections()
	_, _ = c.Execute(ctx, pool.Request{Owner: "alice", Code: "total = 40"})
	res, err := c.Execute(ctx, pool.Request{Owner: "alice", Code: "print(total + 2)"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Status, " ", res.Output)
	// Output: success 42
}

// Without HTTP, the daemon's pool serves requests in process, with the
// same sandbox, environment scrubbing and output redaction: a secret in
// the host's environment never reaches a kernel, and secret-shaped text
// a cell prints is masked.
func ExampleDaemon_Pool() {
	ctx := context.Background()
	_ = os.Setenv("EXAMPLE_API_KEY", "sk-example-secret")
	defer os.Unsetenv("EXAMPLE_API_KEY")
	dir, _ := os.MkdirTemp("", "kpexample")
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o711)

	d, err := daemon.New(ctx, exampleConfig(dir), daemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	defer d.Shutdown(ctx)
	res, err := d.Pool().Execute(ctx, pool.Request{Owner: "bob", Code: "import os\nprint(os.environ.get('EXAMPLE_API_KEY'))\nprint('sk-' + 'proj0123456789abcdef')"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Output)
	// Output:
	// None
	// sk-pro...cdef
}
