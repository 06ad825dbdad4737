package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Exec runs one cell and returns the runner's reply plus the fd-level output
// the cell produced.
//
// Errors: ErrBusy while another cell runs (the kernel is untouched);
// ErrClosed after the kernel died. Every other error means the kernel is
// dead, reaped, released and its staging dir removed: ErrTimeout (ctx
// deadline), ErrCanceled (ctx canceled), ErrProtocol, or a *DeathError when
// the kernel died mid-cell. A cell that called sys.exit returns its Reply
// (Status "exit") and the kernel is dead when Exec returns.
func (k *Kernel) Exec(ctx context.Context, cell Cell) (*Reply, error) {
	select {
	case <-k.done:
		return nil, fmt.Errorf("kernel exec: %w", ErrClosed)
	default:
	}
	if !k.busy.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("kernel exec: %w", ErrBusy)
	}
	defer k.busy.Store(false)

	k.seq++
	n := k.seq
	id := strconv.Itoa(n)
	req, err := encodeRequest(id, cell.Code)
	if err != nil {
		return nil, fmt.Errorf("kernel exec: %w", err)
	}
	started := time.Now()
	k.cell.begin(n, id)
	rep, err := k.run(ctx, req)
	stdout, stderr, stdoutTotal := k.cell.end()
	if err != nil {
		if stdout == "" && stderr == "" {
			return nil, err
		}
		// A killed cell keeps the fd-level output it already wrote
		// (Python-level prints die with the interpreter).
		return &Reply{
			Stdout: stdout, Stderr: stderr,
			StdoutClipped: stdoutTotal > len(stdout), StdoutBytesTotal: stdoutTotal,
			Duration: time.Since(started),
		}, err
	}
	reply := &Reply{
		Status:           rep.Status,
		Stdout:           rep.Stdout + stdout,
		Stderr:           rep.Stderr + stderr,
		StdoutClipped:    rep.StdoutClipped || stdoutTotal > len(stdout),
		StdoutBytesTotal: rep.StdoutLen + stdoutTotal,
		Traceback:        rep.Traceback,
		ExitCode:         rep.ExitCode,
		ExecutionCount:   rep.ExecutionCount,
		Duration:         time.Since(started),
	}
	if rep.Status == "exit" {
		// sys.exit ends the kernel: make sure nothing of it remains.
		k.terminate(fmt.Errorf("kernel: a cell called sys.exit(%d): %w", rep.ExitCode, ErrClosed))
		<-k.done
	}
	return reply, nil
}

// encodeRequest renders {"id":...,"code":...} as one line.
func encodeRequest(id, code string) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(code) + 32)
	buf.WriteString(`{"id":"`)
	buf.WriteString(id)
	buf.WriteString(`","code":`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(code); err != nil { // appends '\n'
		return nil, fmt.Errorf("encode request: %w", err)
	}
	buf.Truncate(buf.Len() - 1)
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// run writes the request and waits until the cell settles: both its reply
// frame and its stderr end marker arrived, or the kernel is gone.
func (k *Kernel) run(ctx context.Context, req []byte) (*wireReply, error) {
	// The write can block on a kernel that stopped reading stdin; ctx's end
	// moves the write deadline into the past, which unblocks it.
	stop := context.AfterFunc(ctx, func() { _ = k.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	_, werr := k.stdin.Write(req)
	stop()
	if werr != nil && ctx.Err() != nil {
		return nil, k.abort(ctx)
	}
	var grace <-chan time.Time
	if werr != nil {
		// Most likely the kernel is exiting; let its exit status say why.
		grace = time.After(closedStdoutGrace)
	}
	var rep *wireReply
	marked := false
	eof := k.stdoutEOF
	for rep == nil || !marked {
		select {
		case rep = <-k.cell.frames:
			marked = marked || rep.StderrClosed
		case <-k.cell.marks:
			marked = true
		case <-eof:
			eof = nil
			grace = time.After(closedStdoutGrace)
		case <-grace:
			grace = nil
			k.terminate(fmt.Errorf("kernel exec: %w", protocolErr("the kernel closed its stdout or stdin")))
		case <-k.exited:
			return k.settleDead(rep)
		case <-ctx.Done():
			return nil, k.abort(ctx)
		}
	}
	return rep, nil
}

// settleDead waits for the teardown of a kernel that exited during a cell
// and returns the cell's reply if the runner sent it before exiting.
func (k *Kernel) settleDead(rep *wireReply) (*wireReply, error) {
	<-k.done // the readers drained the pipes
	if rep == nil {
		select {
		case rep = <-k.cell.frames:
		default:
		}
	}
	if rep != nil {
		return rep, nil
	}
	return nil, k.Err()
}

// abort kills the kernel because ctx ended and returns the error to report.
func (k *Kernel) abort(ctx context.Context) error {
	cause := ErrCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		cause = ErrTimeout
	}
	k.terminate(fmt.Errorf("kernel exec: %w", cause))
	<-k.done
	return k.Err()
}
