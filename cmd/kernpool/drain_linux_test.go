package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// persistServeConfig writes a config with a private cgroup parent, the
// default profile's kernels persisted and drain_on_term as given.
func persistServeConfig(t *testing.T, drainOnTerm bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "kernpool.hcl")
	src := fmt.Sprintf("drain_on_term = %t\ncgroup {\n  parent = \"kernpool-clidrain-%d-%s\"\n}\nprofile \"default\" {\n  persist = true\n  spares = 0\n}\n",
		drainOnTerm, os.Getpid(), filepath.Base(dir))
	if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

func setVariables(t *testing.T, socket string, owners ...string) {
	t.Helper()
	c := api.NewClient(socket)
	defer c.CloseIdleConnections()
	for _, o := range owners {
		if res, err := c.Execute(context.Background(), pool.Request{Owner: o, Code: fmt.Sprintf("x = %q", o)}); err != nil || res.Status != pool.StatusSuccess {
			t.Fatalf("execute %s: %+v, %v", o, res, err)
		}
	}
}

// TestDrainCommand: kernpool drain prints the progress until the daemon
// is drained and exits 0 once every persist kernel was saved; the daemon
// exits 0.
func TestDrainCommand(t *testing.T) {
	d := startServe(t, "--config", persistServeConfig(t, false))
	setVariables(t, d.socket, "a", "b", "c")
	r := cli(t, "", "drain", "--socket", d.socket)
	if r.code != exitOK || !strings.Contains(r.stdout, "drained: 0 cells running, 3 of 3 persist kernels saved, 0 failed, 0 remaining") {
		t.Fatalf("kernpool drain: exit %d\nstdout: %s\nstderr: %s\n%s", r.code, r.stdout, r.stderr, d.logText())
	}
	if !strings.HasPrefix(r.stdout, "draining: ") {
		t.Errorf("the progress does not start draining:\n%s", r.stdout)
	}
	if err := d.wait(); err != nil {
		t.Errorf("the drained daemon exited with %v, want 0\n%s", err, d.logText())
	}
	if n := strings.Count(d.logText(), "checkpoint saved"); n != 3 {
		t.Errorf("%d checkpoints saved, want 3", n)
	}
	if r := cli(t, "", "drain", "--socket", d.socket); r.code != exitUsage {
		t.Errorf("kernpool drain with no daemon: exit %d, want 2", r.code)
	}
}

// TestDrainOnTerm: with drain_on_term = true, SIGTERM drains (the log
// says so, the persist kernels are saved) and the daemon exits 0; with
// the default, SIGTERM is the plain shutdown it always was.
func TestDrainOnTerm(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			d := startServe(t, "--config", persistServeConfig(t, on))
			setVariables(t, d.socket, "a", "b")
			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := d.wait(); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, d.logText())
			}
			logs := d.logText()
			drained := strings.Contains(logs, "draining the node (drain_on_term)") && strings.Contains(logs, "drain finished: saved=2 failed=0")
			if drained != on {
				t.Errorf("drain_on_term %t: drained %t\n%s", on, drained, logs)
			}
			// Both save the persist kernels (the pool's close path).
			if n := strings.Count(logs, "checkpoint saved"); n != 2 {
				t.Errorf("%d checkpoints saved, want 2", n)
			}
		})
	}
}

// TestDrainCommandURL: kernpool drain --url drains a node through its
// network listener with the admin token from $KERNPOOL_TOKEN; another
// token is refused and the node keeps serving.
func TestDrainCommandURL(t *testing.T) {
	conf := persistServeConfig(t, false)
	extra := fmt.Sprintf("listen = \"127.0.0.1:0\"\ntoken \"ops\" {\n  sha256 = %q\n  admin = true\n}\ntoken \"t\" {\n  sha256 = %q\n  owners = [\"a\"]\n}\n",
		api.TokenDigest("kp_ops"), api.TokenDigest("kp_tenant"))
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(extra)
	_ = f.Close()
	d := startServe(t, "--config", conf)
	m := regexp.MustCompile(`serving on the network: listen=(127\.0\.0\.1:\d+)`).FindStringSubmatch(d.logText())
	if m == nil {
		t.Fatalf("no listen address in the log:\n%s", d.logText())
	}
	url := "http://" + m[1]
	setVariables(t, d.socket, "a")
	drain := func(token string) cliResult {
		cmd := exec.Command(binPath, "drain", "--url", url)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Env = append(os.Environ(), "KERNPOOL_TOKEN="+token, "KERNPOOL_SOCKET=")
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
	}
	if r := drain("kp_tenant"); r.code == exitOK || !strings.Contains(r.stderr, "admin credential") {
		t.Fatalf("a tenant token drained the node: exit %d, %s", r.code, r.stderr)
	}
	r := drain("kp_ops")
	if r.code != exitOK || !strings.Contains(r.stdout, "drained: 0 cells running, 1 of 1 persist kernels saved") {
		t.Fatalf("kernpool drain --url: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := d.wait(); err != nil {
		t.Errorf("the drained daemon exited with %v", err)
	}
}
