package pool

import "github.com/kernpool/kernpool/kernel"

// This file holds what a result says of a cell's exception and how its
// streams are finished.

// Exception is a cell's exception as Jupyter's error message (and E2B's
// ExecutionError) carries it: the class name, its str() and the traceback
// entries (a header, one entry per frame, the exception line) whose
// concatenation is the traceback text. kernpool's own frames and the
// kernel's staging path are left out; every field is redacted like the
// output and capped like stderr.
type Exception struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// cleanException is e as it may leave the daemon (nil for nil).
func cleanException(f OutputFilter, e *kernel.Exception) *Exception {
	if e == nil {
		return nil
	}
	out := &Exception{EName: f.CapText(e.EName), EValue: f.CapText(e.EValue), Traceback: make([]string, len(e.Traceback))}
	for i, entry := range e.Traceback {
		out.Traceback[i] = f.CapText(entry)
	}
	return out
}

// finishStreams finishes r's streams with f, as clipped streams when f
// can (see clippedFinisher).
func finishStreams(f OutputFilter, r *kernel.Reply, spillDir string, cell int) (CellOutput, error) {
	if cf, ok := f.(clippedFinisher); ok {
		return cf.FinishClipped(Clipped{r.Stdout, r.StdoutTail, r.StdoutBytesTotal},
			Clipped{r.Stderr, r.StderrTail, r.StderrBytesTotal}, spillDir, cell)
	}
	return f.Finish(r.Stdout, r.Stderr, spillDir, cell)
}
