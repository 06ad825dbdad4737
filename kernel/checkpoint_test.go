package kernel

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
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
	saved, err := a.SaveCheckpoint(context.Background(), 1<<30, &blob)
	if err != nil {
		t.Fatal(err)
	}
	wantSaved := []string{"Base", "Named", "big", "collections", "counts", "double", "n", "osp", "reduce"}
	if !slices.Equal(saved.Saved, wantSaved) || !slices.Equal(saved.Lost, []string{"gen", "square"}) ||
		saved.Size != int64(blob.Len()) || saved.Size < 3_000_000 || saved.SavedTotal != 9 || saved.LostTotal != 2 {
		t.Fatalf("saved = %+v (blob %d bytes)", saved, blob.Len())
	}
	b := startKernel(t, baseSpec(t), "")
	loaded, err := b.RestoreCheckpoint(context.Background(), &blob)
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
	_, err := k.SaveCheckpoint(context.Background(), 1000, &blob)
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
	mustExec(t, k, "import _kernpool_checkpoint as m\ndef broken(op, arg, cells):\n    raise ValueError('no save today')\nm.handle = broken\nx = 3")
	var blob bytes.Buffer
	_, err := k.SaveCheckpoint(context.Background(), 1<<20, &blob)
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
		mustExec(t, k, "import _kernpool_checkpoint as m, json\nm.handle = lambda op, arg, cells: "+reply)
		_, err := k.RestoreCheckpoint(context.Background(), strings.NewReader("blob"))
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
					s, err := a.SaveCheckpoint(context.Background(), 1<<30, &blob)
					if err != nil {
						b.Fatal(err)
					}
					size = s.Size
				}
				b.SetBytes(size)
			})
			b.Run("restore", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := r.RestoreCheckpoint(context.Background(), bytes.NewReader(blob.Bytes())); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(size)
			})
		})
	}
}
