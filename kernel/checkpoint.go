package kernel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kernpool/kernpool/units"
)

// Checkpoints (docs/design.md, "Lossless eviction"): the runner pickles
// and unpickles the namespace inside the kernel (checkpoint.py); this file
// only moves the opaque blob, in chunks of CheckpointChunkBytes, base64 in
// the "code" member of a request and the stdout member of a reply. Each
// reply is a frame under the usual caps, and everything the kernel says
// about the blob is checked again here.
const (
	// CheckpointChunkBytes is the most blob bytes one request or reply
	// carries (base64: 699,052 characters, under CaptureChars).
	CheckpointChunkBytes = 512 << 10
	// MaxCheckpointNames bounds each name list a checkpoint reply gives;
	// maxCheckpointName bounds one name (checkpoint.py keeps to both).
	MaxCheckpointNames = 1000
	maxCheckpointName  = 256
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
// (ErrBusy otherwise) and ctx's end interrupts it. A reply that breaks the
// protocol (more bytes than announced, bad base64, over-long lists) is
// ErrProtocol: w may then hold a prefix, which the caller discards.
func (k *Kernel) SaveCheckpoint(ctx context.Context, limit int64, w io.Writer) (*CheckpointSaved, error) {
	var saved *CheckpointSaved
	err := k.checkpointOps(ctx, func(call opFunc) error {
		out, err := call("checkpoint.save", `{"limit":`+strconv.FormatInt(limit, 10)+`}`)
		if err != nil {
			return err
		}
		if saved, err = parseSaved(out); err != nil {
			return err
		}
		if saved.Size > limit {
			return &CheckpointTooBigError{Size: saved.Size, Limit: limit, Saved: saved}
		}
		for off := int64(0); off < saved.Size; {
			want := min(saved.Size-off, CheckpointChunkBytes)
			out, err := call("checkpoint.read", strconv.FormatInt(off, 10)+","+strconv.FormatInt(want, 10))
			if err != nil {
				return err
			}
			if int64(base64.StdEncoding.DecodedLen(len(out))) > want+2 {
				return protocolErr("checkpoint chunk over its size")
			}
			chunk, err := base64.StdEncoding.DecodeString(out)
			if err != nil || int64(len(chunk)) != want {
				return protocolErr("malformed checkpoint chunk")
			}
			if _, err := w.Write(chunk); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			off += want
		}
		return nil
	})
	if err != nil {
		return saved, fmt.Errorf("kernel checkpoint save: %w", err)
	}
	return saved, nil
}

// RestoreCheckpoint streams a blob SaveCheckpoint wrote (r, read to its
// end) into the kernel and unpickles it there into the user namespace.
func (k *Kernel) RestoreCheckpoint(ctx context.Context, r io.Reader) (*CheckpointLoaded, error) {
	var loaded *CheckpointLoaded
	err := k.checkpointOps(ctx, func(call opFunc) error {
		buf := make([]byte, CheckpointChunkBytes)
		for {
			n, rerr := io.ReadFull(r, buf)
			if n > 0 {
				if _, err := call("checkpoint.put", base64.StdEncoding.EncodeToString(buf[:n])); err != nil {
					return err
				}
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				break
			}
			if rerr != nil {
				return fmt.Errorf("read: %w", rerr)
			}
		}
		out, err := call("checkpoint.load", "")
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

// opFunc sends one runner request and returns its reply's stdout.
type opFunc func(op, arg string) (string, error)

// checkpointOps runs f with the kernel held busy; each call is one
// request and reply.
func (k *Kernel) checkpointOps(ctx context.Context, f func(opFunc) error) error {
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
		rep, interrupted, err := k.run(ctx, req, Cell{})
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
