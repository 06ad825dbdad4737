package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Bounds on a variables listing: the runner keeps to them, the daemon
// enforces them again (every byte from a kernel is hostile).
const (
	MaxVariables    = 1000
	maxVarNameBytes = 256
	maxVarTypeBytes = 256
	maxVarReprBytes = 800 // the runner's 200 characters, at 4 bytes each
)

// Variable is one user-defined name of a kernel's namespace.
type Variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Repr is a short repr (at most 200 characters).
	Repr string `json:"repr"`
	// Len is len() for strings, bytes and builtin containers.
	Len *int64 `json:"len,omitempty"`
	// Bytes is the object's nbytes where it has one (numpy arrays).
	Bytes *int64 `json:"bytes,omitempty"`
}

// Variables is a kernel's namespace listing: at most MaxVariables names in
// sorted order, of Total.
type Variables struct {
	Variables []Variable `json:"variables"`
	Total     int        `json:"total"`
}

// Variables lists the kernel's user-defined names, computed inside the
// kernel between cells. ErrBusy while a cell runs. A repr runs user code,
// so the listing is interruptible like a cell: ctx's end (or Interrupt)
// interrupts it and the kernel keeps its state; the error wraps ErrTimeout,
// ErrCanceled or ErrInterrupted. A listing that outlives its interrupt
// grace (a repr that ignores KeyboardInterrupt) is killed with the kernel,
// and the error says so. A kernel that dies of its own during the listing
// (a repr's os._exit, the OOM killer) returns its *DeathError, wrapped
// with what that means for the listing.
func (k *Kernel) Variables(ctx context.Context) (*Variables, error) {
	if err := k.acquire("kernel variables"); err != nil {
		return nil, err
	}
	defer k.busy.Store(false)
	if ctx.Err() != nil { // nothing was sent: the kernel is untouched
		return nil, fmt.Errorf("kernel variables: %w", ctxCause(ctx))
	}
	id := "v" + strconv.Itoa(k.seq)
	k.cell.begin(k.seq, id, nil) // the runner's counter does not move
	rep, interrupted, err := k.run(ctx, []byte(`{"id":"`+id+`","op":"vars"}`+"\n"), Cell{})
	k.cell.end() // what a repr wrote at the fd level is dropped
	var death *DeathError
	switch {
	case err != nil && interruptCause(err):
		return nil, fmt.Errorf("kernel variables: the listing did not stop within its interrupt grace; the kernel was killed and its state is lost: %w", err)
	case err != nil && errors.As(err, &death) && death.OOMKilled:
		return nil, fmt.Errorf("kernel variables: a __repr__ ran the kernel out of memory; the kernel is dead and its state is lost: %w", err)
	case err != nil && errors.As(err, &death):
		return nil, fmt.Errorf("kernel variables: the kernel died during the listing (a __repr__ ended it); its state is lost: %w", err)
	case err != nil:
		return nil, err
	case interrupted != nil:
		return nil, fmt.Errorf("kernel variables: the listing was interrupted; the kernel keeps its state: %w", interrupted)
	case rep.Status != ReplyOK:
		return nil, fmt.Errorf("kernel variables: the listing failed: %s", rep.Traceback)
	}
	return parseVariables(rep.Stdout)
}

// interruptCause reports whether err is a kill for an interrupt (the
// listing outlived its grace) rather than a death of its own.
func interruptCause(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrCanceled) || errors.Is(err, ErrInterrupted)
}

func parseVariables(text string) (*Variables, error) {
	var v Variables
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("kernel variables: %w", protocolErr("malformed listing"))
	}
	if len(v.Variables) > MaxVariables || v.Total < len(v.Variables) {
		return nil, fmt.Errorf("kernel variables: %w", protocolErr("listing over its bounds"))
	}
	for i := range v.Variables {
		e := &v.Variables[i]
		e.Name, e.Type, e.Repr = clipUTF8(e.Name, maxVarNameBytes), clipUTF8(e.Type, maxVarTypeBytes), clipUTF8(e.Repr, maxVarReprBytes)
	}
	return &v, nil
}

// clipUTF8 cuts s to at most n bytes on a character boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
