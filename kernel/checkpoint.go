package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kernpool/kernpool/units"
)

// Checkpoints (docs/design.md, "Lossless eviction"): the runner pickles
// and unpickles the namespace inside the kernel (checkpoint.py); this file
// only moves the opaque blob, raw, in one exchange each way. A save's blob
// comes in C frames on stdout ("\n<sentinel> C <n>\n" and n bytes) before
// the save's reply, streamed to the caller's writer as it arrives and
// refused past the save's limit from the frame's header; a restore's blob
// goes to the runner on the request pipe ("C <n>\n" and n bytes) before
// the load request. Everything the kernel says about the blob is checked
// again here.
// EnvCheckpointWarm "1" in Spec.Env makes the runner import the
// checkpoint module after the first cell's reply, while the kernel waits
// for its next request: a persist kernel's first save then costs no
// import (a drain saves every such kernel at once). The runner deletes
// it before the first cell.
const EnvCheckpointWarm = "KERNPOOL_CHECKPOINT_WARM"

// CheckpointModule is the checkpoint module's name in the kernel, for a
// Preload that imports it ahead of a restore.
const CheckpointModule = "_kernpool_checkpoint"

const (
	// MaxCheckpointNames bounds each name list a checkpoint reply gives;
	// maxCheckpointName bounds one name (checkpoint.py keeps to both).
	MaxCheckpointNames = 1000
	maxCheckpointName  = 256
	// ckptCopyBytes is the buffer that moves a blob between the pipes
	// and the caller (a quarter of a grown pipe: few wake-ups each way).
	ckptCopyBytes = 256 << 10
)

// CheckpointSaved is what the kernel said about a saved namespace.
type CheckpointSaved struct {
	// Size is the blob's size in bytes.
	Size int64 `json:"size"`
	// Saved and Lost list the names kept and the names that did not
	// pickle (at most MaxCheckpointNames each, of SavedTotal, LostTotal).
	Saved      []string `json:"saved"`
	Lost       []string `json:"lost"`
	SavedTotal int      `json:"saved_total"`
	LostTotal  int      `json:"lost_total"`
}

// CheckpointLoaded is what the kernel said about a restored namespace.
type CheckpointLoaded struct {
	Restored      []string `json:"restored"`
	Lost          []string `json:"lost"`
	RestoredTotal int      `json:"restored_total"`
	LostTotal     int      `json:"lost_total"`
}

// CheckpointTooBigError: the namespace pickled to more than the limit;
// nothing was written.
type CheckpointTooBigError struct {
	Size, Limit int64
	Saved       *CheckpointSaved
}

func (e *CheckpointTooBigError) Error() string {
	return fmt.Sprintf("kernel checkpoint: the state pickles to %s, over the %s left under the owner's checkpoint cap", units.FormatBytes(e.Size), units.FormatBytes(e.Limit))
}

// SaveCheckpoint pickles the kernel's user namespace inside the kernel and
// streams the blob to w, refusing (with a *CheckpointTooBigError, nothing
// written) a blob over limit bytes. Like a cell, it needs the kernel idle
// (ErrBusy otherwise) and ctx's end interrupts it. A kernel that sends
// more than limit bytes is killed (ErrProtocol); one that sends other
// than the size it announces, or a reply that breaks the protocol
// (malformed, over-long lists), is ErrProtocol too: w may then hold a
// prefix, which the caller discards. An interrupted save that does not
// end within grace (0: DefaultInterruptGrace) kills the kernel, as a
// cell's does.
func (k *Kernel) SaveCheckpoint(ctx context.Context, limit int64, w io.Writer, grace time.Duration) (*CheckpointSaved, error) {
	var saved *CheckpointSaved
	err := k.checkpointOps(ctx, grace, func(call opFunc) error {
		k.ckptIn.arm(w, limit)
		out, err := call("checkpoint.save", strconv.FormatInt(limit, 10))
		got, werr := k.ckptIn.disarm()
		if err != nil {
			return err
		}
		if saved, err = parseSaved(out); err != nil {
			return err
		}
		switch {
		case saved.Size > limit && got == 0:
			return &CheckpointTooBigError{Size: saved.Size, Limit: limit, Saved: saved}
		case got != saved.Size:
			return protocolErr(fmt.Sprintf("checkpoint data of %d bytes for a blob of %d", got, saved.Size))
		case werr != nil:
			return werr
		}
		return nil
	})
	if err != nil {
		return saved, fmt.Errorf("kernel checkpoint save: %w", err)
	}
	return saved, nil
}

// RestoreCheckpoint streams a blob of size bytes SaveCheckpoint wrote
// (read from r) into the kernel and unpickles it there into the user
// namespace. A reader that fails or ends early is an error and nothing
// is loaded; a write to the kernel that ctx's end cuts short kills the
// kernel (its request pipe would be left mid-blob); grace is as for
// SaveCheckpoint.
func (k *Kernel) RestoreCheckpoint(ctx context.Context, r io.Reader, size int64, grace time.Duration) (*CheckpointLoaded, error) {
	var loaded *CheckpointLoaded
	err := k.checkpointOps(ctx, grace, func(call opFunc) error {
		if size < 0 {
			return fmt.Errorf("read: negative size %d", size)
		}
		if err := k.sendBlob(ctx, r, size); err != nil {
			return err
		}
		out, err := call("checkpoint.load", strconv.FormatInt(size, 10))
		if err != nil {
			return err
		}
		loaded = new(CheckpointLoaded)
		if json.Unmarshal([]byte(out), loaded) != nil {
			return protocolErr("malformed checkpoint load reply")
		}
		return checkNames(&loaded.Restored, &loaded.Lost)
	})
	if err != nil {
		return nil, fmt.Errorf("kernel checkpoint restore: %w", err)
	}
	return loaded, nil
}

// sendBlob writes "C <size>\n" and size bytes of r to the request pipe.
// When r fails or ends early the rest is zeros, so the runner stays in
// step (the next request, never a load then, drops the blob).
func (k *Kernel) sendBlob(ctx context.Context, r io.Reader, size int64) error {
	if ctx.Err() != nil {
		return ctxCause(ctx)
	}
	// As in run: ctx's end unblocks a write to a kernel that stopped
	// reading.
	growPipe(k.stdin) // as stdout's: fewer, bigger writes and reads
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = k.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	n, rerr, werr := copyBlob(k.stdin, r, size)
	if !stop() {
		<-fired
		_ = k.stdin.SetWriteDeadline(time.Time{})
	}
	switch {
	case werr != nil && ctx.Err() != nil:
		return k.abort(ctxCause(ctx))
	case werr != nil:
		return k.abort(fmt.Errorf("%w: %v", ErrClosed, werr))
	case rerr != nil:
		return fmt.Errorf("read: %w", rerr)
	case n != size:
		return fmt.Errorf("read: %d bytes of a %d-byte checkpoint: %w", n, size, io.ErrUnexpectedEOF)
	}
	return nil
}

// copyBlob writes the header and size bytes of r to w (zeros after r's
// end or error). n is what r gave.
func copyBlob(w io.Writer, r io.Reader, size int64) (n int64, rerr, werr error) {
	if _, werr = io.WriteString(w, "C "+strconv.FormatInt(size, 10)+"\n"); werr != nil {
		return 0, nil, werr
	}
	n, err := io.CopyBuffer(&failWriter{w: w}, io.LimitReader(r, size), make([]byte, ckptCopyBytes))
	if fw := (*failWriter)(nil); errors.As(err, &fw) {
		return n, nil, fw.err
	}
	rerr = err
	if n < size {
		if _, werr = io.CopyN(w, zeros{}, size-n); werr != nil {
			return n, rerr, werr
		}
	}
	return n, rerr, nil
}

// failWriter tells a write error apart from a read error in io.Copy.
type failWriter struct {
	w   io.Writer
	err error
}

func (f *failWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		f.err = err
		return n, f
	}
	return n, nil
}

func (f *failWriter) Error() string { return f.err.Error() }

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// ckptSink takes a save's C frames (the stdout reader calls data) while
// the save runs: at most limit bytes, written to w.
type ckptSink struct {
	mu    sync.Mutex
	w     io.Writer // nil: no save runs
	limit int64
	got   int64
	err   error // w's first error: the rest of the frame is read and dropped
}

func (s *ckptSink) arm(w io.Writer, limit int64) {
	s.mu.Lock()
	s.w, s.limit, s.got, s.err = w, limit, 0, nil
	s.mu.Unlock()
}

// disarm ends the save: what came and w's error. No C frame reaches w
// after it.
func (s *ckptSink) disarm() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = nil
	if s.err != nil {
		return s.got, fmt.Errorf("write: %w", s.err)
	}
	return s.got, nil
}

// data copies one C frame's n-byte body to the running save's writer,
// refusing a frame while no save runs or past the save's limit before
// reading any of it.
func (s *ckptSink) data(body io.Reader, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.w == nil:
		return protocolErr("checkpoint data while no save runs")
	case n > s.limit-s.got:
		return protocolErr(fmt.Sprintf("checkpoint data past the %d-byte limit of its save", s.limit))
	case n == 0:
		return nil
	}
	w := &dropWriter{w: s.w}
	got, err := io.CopyBuffer(w, io.LimitReader(body, n), make([]byte, min(n, ckptCopyBytes)))
	s.got += got
	if s.err == nil {
		s.err = w.err
	}
	return err
}

// dropWriter keeps the first write error and drops what follows it, so
// the frame is still read to its end.
type dropWriter struct {
	w   io.Writer
	err error
}

func (d *dropWriter) Write(p []byte) (int, error) {
	if d.err == nil {
		_, d.err = d.w.Write(p)
	}
	return len(p), nil
}

// opFunc sends one runner request and returns its reply's stdout.
type opFunc func(op, arg string) (string, error)

// checkpointOps runs f with the kernel held busy; each call is one
// request and reply.
func (k *Kernel) checkpointOps(ctx context.Context, grace time.Duration, f func(opFunc) error) error {
	if err := k.acquire("checkpoint"); err != nil {
		return err
	}
	defer k.busy.Store(false)
	call := func(op, arg string) (string, error) {
		if ctx.Err() != nil {
			return "", ctxCause(ctx)
		}
		id := "c" + strconv.Itoa(k.seq)
		req, err := encodeRequest(id, arg, false)
		if err != nil {
			return "", err
		}
		req = append(req[:len(req)-2], `,"op":"`+op+`"}`+"\n"...)
		k.cell.begin(k.seq, id, nil) // the runner's counter does not move
		rep, interrupted, err := k.run(ctx, req, Cell{Grace: grace})
		k.cell.end()
		switch {
		case err != nil:
			return "", err
		case interrupted != nil:
			return "", interrupted
		case rep.Status != "ok":
			return "", fmt.Errorf("%s failed in the kernel: %s", op, lastLine(rep.Traceback))
		}
		return rep.Stdout, nil
	}
	return f(call)
}

// parseSaved decodes and bounds the save reply.
func parseSaved(out string) (*CheckpointSaved, error) {
	s := new(CheckpointSaved)
	if json.Unmarshal([]byte(out), s) != nil || s.Size < 0 {
		return nil, protocolErr("malformed checkpoint save reply")
	}
	return s, checkNames(&s.Saved, &s.Lost)
}

// checkNames refuses over-long name lists and clips each name.
func checkNames(lists ...*[]string) error {
	for _, l := range lists {
		if len(*l) > MaxCheckpointNames {
			return protocolErr("checkpoint reply lists more than " + strconv.Itoa(MaxCheckpointNames) + " names")
		}
		for i, n := range *l {
			(*l)[i] = clipUTF8(n, maxCheckpointName)
		}
	}
	return nil
}

// lastLine is a traceback's last non-empty line (the exception), clipped.
func lastLine(tb string) string {
	tb = strings.TrimRight(tb, "\n")
	if i := strings.LastIndexByte(tb, '\n'); i >= 0 {
		tb = tb[i+1:]
	}
	return clipUTF8(tb, 512)
}
