package kernel

import (
	"context"
	"encoding/json"
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
// kernel between cells. ErrBusy while a cell runs; ctx's end interrupts
// the listing (a repr may run user code).
func (k *Kernel) Variables(ctx context.Context) (*Variables, error) {
	if err := k.acquire("kernel variables"); err != nil {
		return nil, err
	}
	defer k.busy.Store(false)
	id := "v" + strconv.Itoa(k.seq)
	k.cell.begin(k.seq, id, nil) // the runner's counter does not move
	rep, _, err := k.run(ctx, []byte(`{"id":"`+id+`","op":"vars"}`+"\n"), Cell{})
	k.cell.end()
	if err != nil {
		return nil, err
	}
	if rep.Status != ReplyOK {
		return nil, fmt.Errorf("kernel variables: the listing failed: %s", rep.Traceback)
	}
	return parseVariables(rep.Stdout)
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
