//go:build integration && linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// probeCode is run by tenant B against tenant A's resources; it prints one
// JSON object: probe name -> "denied" or what it got.
const probeCode = `
import os, socket, signal, json
a_dir, a_pid, a_sock, daemon = %q, %d, %q, os.getppid()
def probe(f):
    try:
        return 'GOT ' + repr(f())[:80]
    except (PermissionError, ProcessLookupError, FileNotFoundError, ConnectionRefusedError) as e:
        return 'denied'
    except OSError as e:
        return 'denied' if e.errno in (1, 13) else 'error %%s' %% e
def connect():
    s = socket.socket(socket.AF_UNIX); s.connect(a_sock); s.close(); return 'connected'
print(json.dumps({
    'list_staging': probe(lambda: os.listdir(a_dir)),
    'read_file': probe(lambda: open(os.path.join(a_dir, 'tmp', 'private.txt')).read()),
    'connect_rpc': probe(connect),
    'signal_kernel': probe(lambda: os.kill(a_pid, 0)),
    'a_environ': probe(lambda: open('/proc/%%d/environ' %% a_pid, 'rb').read()),
    'daemon_environ': probe(lambda: open('/proc/%%d/environ' %% daemon, 'rb').read()),
}))
`

// TestTenantsIsolated: owner B cannot read owner A's dirs, reach A's tool
// socket, signal A's kernel, or read A's or the daemon's environment.
func TestTenantsIsolated(t *testing.T) {
	requireDaemon(t)
	canary := fmt.Sprintf("canary-%d-do-not-leak", os.Getpid())
	o := capped()
	o.Env = []string{"KERNPOOL_IT_CANARY_TOKEN=" + canary}
	d := StartDaemon(t, o)

	a := d.RunReq(t, ExecReq{Owner: "alice", Tools: []string{"echo"}, Timeout: "30s", Code: `
import os
open(os.path.join(os.environ['TMPDIR'], 'private.txt'), 'w').write('alice-private')
print(os.path.dirname(os.environ['TMPDIR']))`})
	if a.Status != "success" {
		t.Fatalf("alice's cell: %+v", a)
	}
	aDir := strings.TrimSpace(a.Output)
	var aPid, aUID int
	for _, k := range d.Live(t) {
		if k.Owner == "alice" {
			aPid, aUID = k.Pid, k.UID
		}
	}
	if aPid == 0 {
		t.Fatalf("alice's kernel is not in /v1/kernels")
	}
	aSock := filepath.Join(aDir, "rpc.sock")
	b := d.Run(t, "bob", fmt.Sprintf(probeCode, aDir, aPid, aSock))
	if b.Status != "success" {
		t.Fatalf("bob's probe cell: %+v", b)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(b.Output)), &got); err != nil {
		t.Fatalf("probe output %q: %v", b.Output, err)
	}
	for probe, verdict := range got {
		if verdict != "denied" {
			t.Errorf("bob %s of alice's kernel (pid %d, uid %d): %s", probe, aPid, aUID, verdict)
		}
	}
	if strings.Contains(b.Output, canary) || strings.Contains(a.Output, canary) {
		t.Errorf("the daemon's canary secret reached a cell")
	}
	for _, k := range d.Live(t) {
		if k.Owner == "bob" && k.UID == aUID {
			t.Errorf("alice and bob share uid %d", aUID)
		}
	}
	shutdownAndCheck(t, d, "alice", "bob")
}
