package kernel

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// A save whose blob is exactly its limit is written whole (its last C
// frame ends at the limit); one byte less and it is too big, nothing
// written. The first save, under a large limit, measures the blob.
func TestCheckpointAtTheLimit(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = b'a' * 5000")
	var probe bytes.Buffer
	s, err := k.SaveCheckpoint(context.Background(), 1<<30, &probe, 0)
	if err != nil || s.Size != int64(probe.Len()) {
		t.Fatalf("probe save: %+v, %v (%d bytes)", s, err, probe.Len())
	}
	var at bytes.Buffer
	if s, err := k.SaveCheckpoint(context.Background(), int64(probe.Len()), &at, 0); err != nil || s.Size != int64(probe.Len()) || at.Len() != probe.Len() {
		t.Fatalf("save at the limit: %+v, %v (%d bytes of %d)", s, err, at.Len(), probe.Len())
	}
	var past bytes.Buffer
	_, err = k.SaveCheckpoint(context.Background(), int64(probe.Len()-1), &past, 0)
	var big *CheckpointTooBigError
	if !errors.As(err, &big) || big.Size != int64(probe.Len()) || past.Len() != 0 {
		t.Fatalf("save one byte under the blob: %v, %d bytes written", err, past.Len())
	}
}

type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("store full")
}

// A save whose writer fails reports the writer's error, though the kernel
// sent the whole blob; the kernel keeps its state.
func TestCheckpointSaveWriterFails(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 3")
	w := &failingWriter{}
	_, err := k.SaveCheckpoint(context.Background(), 1<<30, w, 0)
	if err == nil || !strings.Contains(err.Error(), "write: store full") || w.writes != 1 {
		t.Fatalf("err = %v after %d writes; want the writer's error after its first write", err, w.writes)
	}
	if rep := mustExec(t, k, "x"); rep.Stdout != "3\n" {
		t.Fatalf("after the failed save: %+v", rep)
	}
}

// Save replies at the edges: a blob announced at exactly the limit that
// never comes is short of its size (not too big), an empty blob
// announced and sent is a save of nothing, and C frames of 0 bytes
// (which a hostile kernel may send) add nothing to the blob around them.
func TestCheckpointHostileSaveAtTheEdges(t *testing.T) {
	const limit = 1000
	empty := `os.write(r.frame_fd, b"\n" + r.sentinel + b" C 0\n")`
	cases := []struct {
		name, reply, send, err, blob string
	}{
		{"announced at the limit, never sent", `json.dumps({"size": 1000, "saved": ["x"], "lost": []})`, "pass", "checkpoint data of 0 bytes for a blob of 1000", ""},
		{"empty blob", `json.dumps({"size": 0, "saved": [], "lost": []})`, "pass", "", ""},
		{"empty frames around the blob", `json.dumps({"size": 3, "saved": ["x"], "lost": []})`,
			empty + "\n    " + `os.write(r.frame_fd, b"\n" + r.sentinel + b" C 3\nabc")` + "\n    " + empty, "", "abc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := startKernel(t, baseSpec(t), "")
			mustExec(t, k, hostileSave(tc.reply, tc.send))
			var blob bytes.Buffer
			s, err := k.SaveCheckpoint(context.Background(), limit, &blob, 0)
			switch {
			case tc.err == "" && (err != nil || s.Size != int64(len(tc.blob)) || blob.String() != tc.blob):
				t.Fatalf("saved %+v, %v, blob %q; want a save of %q", s, err, blob.String(), tc.blob)
			case tc.err != "" && (!errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want a protocol error saying %q", err, tc.err)
			}
			if rep := mustExec(t, k, "x"); rep.Stdout != "3\n" {
				t.Fatalf("after the save: %+v", rep)
			}
		})
	}
}

// A load reply may list exactly MaxCheckpointNames names (one more breaks
// the protocol: TestCheckpointHostileLoadReply).
func TestCheckpointLoadReplyAtTheNameLimit(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, `import _kernpool_checkpoint as m, json
m.handle = lambda op, arg, cells, blob: json.dumps({"restored": ["n%d" % i for i in range(1000)], "lost": [], "restored_total": 1000})`)
	loaded, err := k.RestoreCheckpoint(context.Background(), strings.NewReader("blob"), 4, 0)
	if err != nil || len(loaded.Restored) != 1000 || loaded.Restored[999] != "n999" || loaded.RestoredTotal != 1000 {
		t.Fatalf("loaded %+.80v, %v; want the 1000 names", loaded, err)
	}
}

// An empty blob reaches the kernel, which refuses it; the kernel stays in
// step and keeps its state.
func TestCheckpointRestoreEmptyBlob(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 5")
	_, err := k.RestoreCheckpoint(context.Background(), strings.NewReader(""), 0, 0)
	if err == nil || !strings.Contains(err.Error(), "checkpoint.load failed in the kernel") {
		t.Fatalf("err = %v, want the kernel's refusal of an empty blob", err)
	}
	if rep := mustExec(t, k, "x"); rep.Stdout != "5\n" {
		t.Fatalf("after the empty restore: %+v", rep)
	}
}

// A context that ends while the blob's write is armed, after the blob was
// written whole: the restore is canceled before its load request, and the
// kernel (which drops an unloaded blob at the next request) keeps its
// state.
func TestCheckpointRestoreContextEndingAroundTheBlob(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 5")
	ctx := &endsOnAfterFunc{done: make(chan struct{})}
	if _, err := k.RestoreCheckpoint(ctx, strings.NewReader("blob"), 4, 0); !errors.Is(err, ErrCanceled) {
		t.Fatalf("err = %v, want ErrCanceled", err)
	}
	if rep := mustExec(t, k, "x"); rep.Stdout != "5\n" {
		t.Fatalf("after the canceled restore: %+v", rep)
	}
}

// lastLine is a traceback's last non-empty line, cut to 512 bytes on a
// character boundary.
func TestLastLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Traceback (most recent call last):\n  File \"x\", line 1\nValueError: no\n\n", "ValueError: no"},
		{"\nboom", "boom"},
		{"\nboom\n", "boom"},
		{"only", "only"},
		{"", ""},
		{"a\n" + strings.Repeat("é", 300), strings.Repeat("é", 256)},
	}
	for _, c := range cases {
		if got := lastLine(c.in); got != c.want {
			t.Errorf("lastLine(%.40q) = %.40q, want %.40q", c.in, got, c.want)
		}
	}
}
