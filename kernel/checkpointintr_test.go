//go:build !windows

package kernel

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A save whose pickling loops is interrupted at its context's cancel,
// like a cell: the save fails with ErrCanceled (not as a save the kernel
// refused), nothing reaches w, and the kernel keeps its state.
func TestCheckpointSaveInterrupted(t *testing.T) {
	requireProc(t)
	k := startKernel(t, baseSpec(t), "")
	fifo, ran := reprRuns(t)
	mustExec(t, k, `import _kernpool_checkpoint as m
def handle(op, arg, cells, blob):
    with open(`+pyStr(fifo)+`, "w") as f:
        f.write("x")
    while True:
        pass
m.handle = handle
x = 3`)
	var blob bytes.Buffer
	s, err := k.SaveCheckpoint(&endsOn{Context: context.Background(), done: ran, err: context.Canceled}, 1000, &blob, testenv.Patience)
	if !errors.Is(err, ErrCanceled) || blob.Len() != 0 {
		t.Fatalf("saved %+v, %v, %d bytes; want ErrCanceled and nothing written", s, err, blob.Len())
	}
	if rep := mustExec(t, k, "x"); rep.Stdout != "3\n" {
		t.Fatalf("after the interrupted save: %+v", rep)
	}
}
