package kernel

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

const ckptStateCell = `import os.path as osp, collections
from functools import reduce

class Base:
    def hello(self):
        return "hi " + self.name

class Named(Base):
    def __init__(self, name):
        self.name = name

def double(v):
    return 2 * v

n = Named("ann")
counts = collections.Counter("abca")
square = lambda v: v * v
gen = (i for i in range(3))
big = b"q" * 3_000_000
`

// TestCheckpointRoundTrip: what one kernel saves, another restores, name
// by name: modules by name (import-as too), cell-defined classes and
// functions by their source, values by pickle; what does not pickle (a
// generator, a lambda) is lost alone. The 3 MB value crosses chunks.
func TestCheckpointRoundTrip(t *testing.T) {
	a := startKernel(t, baseSpec(t), "")
	mustExec(t, a, ckptStateCell)
	var blob bytes.Buffer
	saved, err := a.SaveCheckpoint(context.Background(), 1<<30, &blob, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantSaved := []string{"Base", "Named", "big", "collections", "counts", "double", "n", "osp", "reduce"}
	if !slices.Equal(saved.Saved, wantSaved) || !slices.Equal(saved.Lost, []string{"gen", "square"}) ||
		saved.Size != int64(blob.Len()) || saved.Size < 3_000_000 || saved.SavedTotal != 9 || saved.LostTotal != 2 {
		t.Fatalf("saved = %+v (blob %d bytes)", saved, blob.Len())
	}
	b := startKernel(t, baseSpec(t), "")
	loaded, err := b.RestoreCheckpoint(context.Background(), &blob, int64(blob.Len()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(loaded.Restored, wantSaved) || len(loaded.Lost) != 0 {
		t.Fatalf("loaded = %+v", loaded)
	}
	rep := mustExec(t, b, "print(n.hello(), isinstance(n, Base), double(21), counts['a'], osp.join('a', 'b'), reduce(int.__add__, [1, 2]), len(big))")
	if want := "hi ann True 42 2 a/b 3 3000000\n"; rep.Stdout != want {
		t.Fatalf("stdout = %q, want %q", rep.Stdout, want)
	}
}

// TestCheckpointTooBig: over the limit nothing is written.
func TestCheckpointTooBig(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = b'a' * 5000")
	var blob bytes.Buffer
	_, err := k.SaveCheckpoint(context.Background(), 1000, &blob, 0)
	var big *CheckpointTooBigError
	if !errors.As(err, &big) || big.Limit != 1000 || big.Size < 5000 || blob.Len() != 0 {
		t.Fatalf("err = %v, %d bytes written", err, blob.Len())
	}
	// The kernel keeps its state and serves cells.
	if rep := mustExec(t, k, "len(x)"); rep.Stdout != "5000\n" {
		t.Fatalf("stdout = %q", rep.Stdout)
	}
}

// TestCheckpointOpFailureKeepsKernel: an op that raises in the kernel is
// an error reply (its last traceback line in the error); the kernel stays.
func TestCheckpointOpFailureKeepsKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import _kernpool_checkpoint as m\ndef broken(op, arg, cells, blob):\n    raise ValueError('no save today')\nm.handle = broken\nx = 3")
	var blob bytes.Buffer
	_, err := k.SaveCheckpoint(context.Background(), 1<<20, &blob, 0)
	if err == nil || !strings.Contains(err.Error(), "ValueError: no save today") {
		t.Fatalf("err = %v, want the kernel's ValueError", err)
	}
	if rep := mustExec(t, k, "x"); rep.Stdout != "3\n" {
		t.Fatalf("after the failed op: %+v", rep)
	}
}

// TestCheckpointHostileLoadReply: a kernel that answers the load with an
// over-long name list or garbage breaks the protocol.
func TestCheckpointHostileLoadReply(t *testing.T) {
	for _, reply := range []string{`json.dumps({"restored": ["n%d" % i for i in range(1001)], "lost": []})`, `"]]"`} {
		k := startKernel(t, baseSpec(t), "")
		mustExec(t, k, "import _kernpool_checkpoint as m, json\nm.handle = lambda op, arg, cells, blob: "+reply)
		_, err := k.RestoreCheckpoint(context.Background(), strings.NewReader("blob"), 4, 0)
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("reply %s: err = %v, want ErrProtocol", reply, err)
		}
	}
}

// BenchmarkCheckpoint: save on one kernel and restore on another, for a
// small namespace and for 10 MB of data (SetBytes: the blob size).
func BenchmarkCheckpoint(b *testing.B) {
	for _, bc := range []struct{ name, cell string }{
		{"small", "x = 1\nd = {'k': list(range(100))}\nimport json as j"},
		{"10MB", "import os\ndata = os.urandom(10 << 20)\nrows = [{'i': i} for i in range(10000)]"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := startKernel(b, baseSpec(b), "")
			mustExec(b, a, bc.cell)
			r := startKernel(b, baseSpec(b), "")
			var blob bytes.Buffer
			var size int64
			b.Run("save", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					blob.Reset()
					s, err := a.SaveCheckpoint(context.Background(), 1<<30, &blob, 0)
					if err != nil {
						b.Fatal(err)
					}
					size = s.Size
				}
				b.SetBytes(size)
			})
			b.Run("restore", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := r.RestoreCheckpoint(context.Background(), bytes.NewReader(blob.Bytes()), size, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(size)
			})
		})
	}
}

// TestCheckpointRawValues: bytes and bytearray values travel raw, and a
// value whose pickle keeps its buffer out of band (pickle protocol 5, as
// numpy arrays do) comes back on the received blob, restored after the
// class it needs.
func TestCheckpointRawValues(t *testing.T) {
	a := startKernel(t, baseSpec(t), "")
	mustExec(t, a, `import pickle
class Buf:
    def __init__(self, b):
        self.b = b
    def __reduce_ex__(self, proto):
        return Buf, (pickle.PickleBuffer(self.b),)
raw = bytes(range(256)) * 4096
ba = bytearray(b"xyz" * 100000)
ob = Buf(bytearray(b"w" * 200000))
`)
	var blob bytes.Buffer
	saved, err := a.SaveCheckpoint(context.Background(), 1<<30, &blob, 0)
	if err != nil || saved.Size != int64(blob.Len()) || saved.LostTotal != 0 {
		t.Fatalf("saved = %+v, %v (blob %d bytes)", saved, err, blob.Len())
	}
	b := startKernel(t, baseSpec(t), "")
	loaded, err := b.RestoreCheckpoint(context.Background(), &blob, saved.Size, 0)
	if want := []string{"Buf", "ba", "ob", "pickle", "raw"}; err != nil || !slices.Equal(loaded.Restored, want) {
		t.Fatalf("loaded = %+v, %v; want %v", loaded, err, want)
	}
	rep := mustExec(t, b, "print(raw == bytes(range(256)) * 4096, type(raw).__name__, ba == b'xyz' * 100000, type(ba).__name__, bytes(ob.b) == b'w' * 200000)")
	if want := "True bytes True bytearray True\n"; rep.Stdout != want {
		t.Fatalf("stdout = %q, want %q", rep.Stdout, want)
	}
}

// TestCheckpointLoadsVersion1: a blob in the format before raw values
// (one pickle) still restores.
func TestCheckpointLoadsVersion1(t *testing.T) {
	a := startKernel(t, baseSpec(t), "")
	rep := mustExec(t, a, `import pickle
print(pickle.dumps({"v": 1, "modules": [("osp", "os.path")], "defs": [((1, 1), "f", "def f():\n    return 7\n")],
    "values": [("x", pickle.dumps(42))]}).hex(), end="")`)
	v1, err := hex.DecodeString(rep.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := a.RestoreCheckpoint(context.Background(), bytes.NewReader(v1), int64(len(v1)), 0)
	if err != nil || !slices.Equal(loaded.Restored, []string{"f", "osp", "x"}) {
		t.Fatalf("loaded = %+v, %v", loaded, err)
	}
	if rep := mustExec(t, a, "print(x, f(), osp.join('a', 'b'))"); rep.Stdout != "42 7 a/b\n" {
		t.Fatalf("stdout = %q", rep.Stdout)
	}
}

// hostileSave makes the kernel's save answer reply and then run send
// (Python statements with the runner in r) in place of sending its blob.
func hostileSave(reply, send string) string {
	return `import _kernpool_checkpoint as m, json, os, sys
def handle(op, arg, cells, blob):
    return ` + reply + `
def outgoing():
    r = sys._getframe(1).f_locals["runner"]
    ` + send + `
    return []
m.handle, m.outgoing = handle, outgoing
x = 3
`
}

// TestCheckpointHostileData: what a kernel sends as a save's blob is
// bounded by the save's limit, read before any byte of it, and must be
// the size announced; a stream cut short (the kernel died) fails the
// save. w never gets more than the limit; a kernel whose stream can no
// longer be trusted is killed, one that kept the framing serves on.
func TestCheckpointHostileData(t *testing.T) {
	const limit = 1000
	frame := func(n int, data string) string {
		return `os.write(r.frame_fd, b"\n" + r.sentinel + b" C ` + strconv.Itoa(n) + `\n" + ` + data + `)`
	}
	sized := `json.dumps({"size": 100, "saved": ["x"], "lost": []})`
	cases := []struct {
		name, reply, send, err string
		got                    int
		dies                   bool
	}{
		{"past the limit", sized, frame(limit+1, `b"z" * 1001`), "checkpoint data past the 1000-byte limit of its save", 0, true},
		{"past the limit in two frames", sized, frame(600, `b"z" * 600`) + "\n    " + frame(600, `b"z" * 600`), "checkpoint data past the 1000-byte limit of its save", 600, true},
		{"short of its size", sized, frame(10, `b"z" * 10`), "checkpoint data of 10 bytes for a blob of 100", 10, false},
		{"over its size", sized, frame(200, `b"z" * 200`), "checkpoint data of 200 bytes for a blob of 100", 200, false},
		{"data for a save over the limit", `json.dumps({"size": 5000, "saved": [], "lost": []})`, frame(10, `b"z" * 10`), "checkpoint data of 10 bytes for a blob of 5000", 10, false},
		{"cut short", sized, frame(100, `b"z" * 10`) + "\n    os._exit(3)", "exited", 10, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := startKernel(t, baseSpec(t), "")
			mustExec(t, k, hostileSave(tc.reply, tc.send))
			var blob bytes.Buffer
			_, err := k.SaveCheckpoint(context.Background(), limit, &blob, 0)
			if err == nil || !strings.Contains(err.Error(), tc.err) || blob.Len() != tc.got {
				t.Fatalf("err = %v, %d bytes written; want %q, %d bytes", err, blob.Len(), tc.err, tc.got)
			}
			if tc.dies {
				<-k.Done()
				return
			}
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("err = %v, want ErrProtocol", err)
			}
			if rep := mustExec(t, k, "x"); rep.Stdout != "3\n" {
				t.Fatalf("after the refused save: %+v", rep)
			}
		})
	}
}

// TestCheckpointDataOutsideSave: a C frame while no save runs breaks the
// protocol: the kernel is killed.
func TestCheckpointDataOutsideSave(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	_, err := k.Exec(context.Background(), Cell{Code: `import os, sys
f, r = sys._getframe(), None
while f is not None and r is None:
    r = f.f_locals.get("self") if hasattr(f.f_locals.get("self"), "frame_fd") else None
    f = f.f_back
os.write(r.frame_fd, b"\n" + r.sentinel + b" C 5\nhello")
`})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "checkpoint data while no save runs") {
		t.Fatalf("err = %v, want the protocol error", err)
	}
	<-k.Done()
}

// TestCheckpointRestoreShortReader: a blob that ends early or fails to
// read is an error and loads nothing; the kernel stays in step and keeps
// its state.
func TestCheckpointRestoreShortReader(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "x = 5")
	for _, r := range []io.Reader{strings.NewReader("abc"), io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(errors.New("store gone")))} {
		_, err := k.RestoreCheckpoint(context.Background(), r, 10, 0)
		if err == nil || !(strings.Contains(err.Error(), "3 bytes of a 10-byte checkpoint") || strings.Contains(err.Error(), "store gone")) {
			t.Fatalf("err = %v", err)
		}
		if rep := mustExec(t, k, "x"); rep.Stdout != "5\n" {
			t.Fatalf("after the failed restore: %+v", rep)
		}
	}
}

// TestCheckpointWarm: with EnvCheckpointWarm the runner imports the
// checkpoint module after the first cell (the second cell sees it, and
// not the variable); without it, only a checkpoint request would.
func TestCheckpointWarm(t *testing.T) {
	for _, warm := range []bool{false, true} {
		spec := baseSpec(t)
		if warm {
			spec.Env = append(slices.Clip(spec.Env), EnvCheckpointWarm+"=1")
		}
		k := startKernel(t, spec, "")
		mustExec(t, k, "x = 1")
		rep := mustExec(t, k, "import sys, os\nprint('_kernpool_checkpoint' in sys.modules, '"+EnvCheckpointWarm+"' in os.environ)")
		if want := map[bool]string{false: "False", true: "True"}[warm] + " False\n"; rep.Stdout != want {
			t.Fatalf("warm %v: stdout = %q, want %q", warm, rep.Stdout, want)
		}
	}
}
