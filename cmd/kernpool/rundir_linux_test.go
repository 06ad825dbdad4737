package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestServeStartsWhereItsRunDirIs0700 is issue 21's new user: the run dir
// exists 0700 holding only the uid lock dir (creating that first once
// left /run/kernpool so), and the socket is moved there through
// $KERNPOOL_SOCKET with no --state-dir. serve starts, makes its own dir
// searchable, keeps its state dir beside the socket as --help says, and a
// kernel of another uid reaches its staging dir and runs a cell.
func TestServeStartsWhereItsRunDirIs0700(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	dir, err := os.MkdirTemp("", "kpd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "kernpool")
	if err := os.MkdirAll(filepath.Join(run, "uids"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{socket: filepath.Join(run, "kernpool.sock"), state: filepath.Join(run, "state"),
		logs: &testenv.SyncBuffer{}, exited: make(chan error, 1)}
	runServe(t, d, []string{"KERNPOOL_SOCKET=" + d.socket},
		[]string{"serve", "--config", privateCgroupConfig(t, dir), "--interpreter", testenv.Python})
	if fi, err := os.Stat(run); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("run dir after serve started: %v, %v; want mode 0711", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(d.state); err != nil || !fi.IsDir() {
		t.Errorf("state dir beside the socket %s: %v", d.state, err)
	}
	r := cli(t, "", "exec", "--socket", d.socket, "import os; print(os.getuid())")
	if uid := strings.TrimSpace(r.stdout); r.code != 0 || uid == "" || uid == "0" {
		t.Errorf("a cell: %+v; want it run by a kernel uid\n%s", r, d.logText())
	}
}
