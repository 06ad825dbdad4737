package pool

import (
	"strings"
	"testing"
)

// hostileCkpt replaces the kernel's checkpoint handler (the kernel is the
// tenant's: a cell can) with one that answers save with saveReply and
// sends data (both Python expressions) as the blob.
func hostileCkpt(saveReply, data string) string {
	return `import _kernpool_checkpoint as m, json
def handle(op, arg, cells, blob):
    return ` + saveReply + `
m.handle = handle
m.outgoing = lambda: [` + data + `]
x = 1
`
}

// hostileRoom is the owner's cap in TestPersistHostileCheckpoint: a save
// may send it less the trailer, 1048564 bytes.
const hostileRoom = 1 << 20

// TestPersistHostileCheckpoint: a kernel that lies about its checkpoint
// (garbage, other bytes than announced, more than the owner's room, a
// huge size, endless name lists) gets nothing stored but a refusal note;
// the daemon reads none of a blob past the room.
func TestPersistHostileCheckpoint(t *testing.T) {
	const size = `json.dumps({"size": 1000, "saved": ["x"], "lost": [], "saved_total": 1, "lost_total": 0})`
	cases := []struct {
		name, save, data, note string
	}{
		{"garbage reply", `"not json {"`, `b""`, "malformed checkpoint save reply"},
		// Refused from the frame's header, before a byte of it is read
		// (the kernel is killed: its stream cannot be trusted after).
		{"data past the room", size, `b"z" * (1 << 20)`, "checkpoint data past the 1048564-byte limit of its save"},
		{"short data", size, `b"z" * 10`, "checkpoint data of 10 bytes for a blob of 1000"},
		{"long data", size, `b"z" * 600000`, "checkpoint data of 600000 bytes for a blob of 1000"},
		{"huge size", `json.dumps({"size": 1 << 40, "saved": [], "lost": []})`, `b""`, "it pickles to 1099511627776 bytes, over the 1048564 bytes left"},
		{"endless names", `json.dumps({"size": 10, "saved": ["n%d" % i for i in range(5000)], "lost": []})`, `b""`, "checkpoint reply lists more than 1000 names"},
		{"negative size", `json.dumps({"size": -5, "saved": [], "lost": []})`, `b""`, "malformed checkpoint save reply"},
	}
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.MaxBytesPerOwner = hostileRoom
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, run(t, p, Request{Owner: "h", Code: hostileCkpt(tc.save, tc.data)}), StatusSuccess)
			run(t, p, Request{Owner: "other", Code: "pass"}) // evicts h: its save
			waitSaved(t, p)
			infos := p.Checkpoints()
			if len(infos) != 1 || infos[0].Owner != "h" || !strings.Contains(infos[0].Refused, tc.note) || infos[0].Bytes > 4096 {
				t.Fatalf("checkpoints = %+v, want a refusal saying %q", infos, tc.note)
			}
			res := run(t, p, Request{Owner: "h", Code: "'x' in globals()"})
			if res.Output != "False\n" || res.Kernel.Restored || !strings.Contains(res.Warning, tc.note) {
				t.Fatalf("next cell = %+v", res)
			}
			// h's cell evicted other's kernel, whose save (of nothing)
			// runs off the request path: its temp file goes when it ends.
			waitSaved(t, p)
			if files := ckptFiles(t, p); len(files) != 0 {
				t.Fatalf("files = %v", files)
			}
		})
	}
}
