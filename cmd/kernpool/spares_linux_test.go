package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestPsListsSpares: `serve --spares 1` keeps one spare, which `ps` lists
// as (spare), `ps --json` with "spare": true and no owner, /metrics counts
// in kernpool_kernels_spare; a new owner's first cell runs on it, and the
// pool refills.
func TestPsListsSpares(t *testing.T) {
	d := startServe(t, "--spares", "1")
	client := api.NewClient(d.socket)
	defer client.CloseIdleConnections()
	spare := waitSpare(t, client, "")
	r := cli(t, "", "ps", "--socket", d.socket)
	if r.code != 0 || !strings.Contains(r.stdout, spare.ID+"  (spare)") {
		t.Fatalf("ps does not list spare %s as (spare): %+v", spare.ID, r)
	}
	if got := value(t, scrape(t, unixHTTP(d.socket)), "kernpool_kernels_spare", "mode=default"); got != 1 {
		t.Fatalf("kernpool_kernels_spare = %v, want 1", got)
	}
	r = cli(t, "", "exec", "--socket", d.socket, "--owner", "erin", "--json", "1")
	var res pool.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Kernel.ID != spare.ID || res.Kernel.Reused {
		t.Fatalf("first cell of a new owner: %v %+v (spare %s)", err, res, spare.ID)
	}
	next := waitSpare(t, client, spare.ID)
	if next.ID == spare.ID {
		t.Fatalf("the claimed spare %s is listed as a spare again", spare.ID)
	}
}

// waitSpare polls the daemon's list (another process: no event to wait
// on) until it shows a spare other than not, and returns it.
func waitSpare(t *testing.T, c *api.Client, not string) pool.KernelInfo {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for time.Now().Before(deadline) {
		list, err := c.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range list {
			if k.Spare && k.ID != not {
				if k.Owner != "" || k.Pid <= 0 {
					t.Fatalf("spare listed as %+v", k)
				}
				return k
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no spare listed within 30s")
	return pool.KernelInfo{}
}

// TestReloadReplacesSpares (root): SIGHUP with a changed profile stops
// the spares started with the old one; the new spare has the new memory
// limit in its cgroup and is what a new owner's first cell runs on.
func TestReloadReplacesSpares(t *testing.T) {
	testenv.RequireRoot(t) // cgroup limits need root
	conf, _ := opsConfig(t, "profile \"default\" {\n  memory_max = \"64MiB\"\n  spares = 1\n}\n")
	d := startServe(t, "--config", conf)
	client := api.NewClient(d.socket)
	defer client.CloseIdleConnections()
	old := waitSpare(t, client, "")
	if got := cgroupMemoryLimit(t, old.Pid); got != 64<<20 {
		t.Fatalf("spare's limit %d, want 64 MiB", got)
	}
	src, _ := os.ReadFile(conf)
	if err := os.WriteFile(conf, []byte(strings.Replace(string(src), "64MiB", "96MiB", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reload", func() bool { return strings.Contains(d.logText(), "reload applied") })
	fresh := waitSpare(t, client, old.ID)
	if !pidGone(old.Pid) {
		t.Errorf("the old profile's spare (pid %d) survives the reload", old.Pid)
	}
	if got := cgroupMemoryLimit(t, fresh.Pid); got != 96<<20 {
		t.Fatalf("new spare's limit %d, want 96 MiB", got)
	}
	res, err := client.Execute(context.Background(), pool.Request{Owner: "new", Code: "1"})
	if err != nil || res.Kernel.ID != fresh.ID || res.Kernel.Isolation.MemoryMax != 96<<20 {
		t.Fatalf("first cell after the reload: %v %+v (spare %s)", err, res, fresh.ID)
	}
}
