package pool

import (
	"strings"
	"testing"
)

// hostileCkpt replaces the kernel's checkpoint handler (the kernel is the
// tenant's: a cell can) with one that answers save with saveReply (a
// Python expression) and every chunk read with chunk (one too).
func hostileCkpt(saveReply, chunk string) string {
	return `import _kernpool_checkpoint as m, base64, json
def handle(op, arg, cells):
    if op == "checkpoint.save":
        return ` + saveReply + `
    return ` + chunk + `
m.handle = handle
x = 1
`
}

// TestPersistHostileCheckpoint: a kernel that lies about its checkpoint
// (garbage, more bytes than announced, a huge size, endless name lists)
// gets nothing stored but a refusal note, and the daemon reads no more
// than one chunk of it.
func TestPersistHostileCheckpoint(t *testing.T) {
	const size = `json.dumps({"size": 1000, "saved": ["x"], "lost": [], "saved_total": 1, "lost_total": 0})`
	cases := []struct {
		name, save, chunk, note string
	}{
		{"garbage reply", `"not json {"`, `""`, "malformed checkpoint save reply"},
		// 600 kB for a 1000-byte blob: refused from the base64 length,
		// before decoding it.
		{"chunk over its size", size, `base64.b64encode(b"z" * 600000).decode()`, "checkpoint chunk over its size"},
		{"short chunk", size, `base64.b64encode(b"z" * 10).decode()`, "malformed checkpoint chunk"},
		{"bad base64", size, `"!!!!" * 300`, "malformed checkpoint chunk"},
		{"huge size", `json.dumps({"size": 1 << 40, "saved": [], "lost": []})`, `""`, "it pickles to 1099511627776 bytes, over the 268435444 bytes left"},
		{"endless names", `json.dumps({"size": 10, "saved": ["n%d" % i for i in range(5000)], "lost": []})`, `""`, "checkpoint reply lists more than 1000 names"},
		{"negative size", `json.dumps({"size": -5, "saved": [], "lost": []})`, `""`, "malformed checkpoint save reply"},
	}
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 1 })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, run(t, p, Request{Owner: "h", Code: hostileCkpt(tc.save, tc.chunk)}), StatusSuccess)
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
