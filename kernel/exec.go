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
// When ctx ends or Interrupt is called while the cell runs, the cell is
// interrupted (SIGINT to the runner, SIGKILL to the cell's other
// processes); if it ends within cell.Grace, Exec returns its Reply with
// Interrupted set and the kernel keeps its state. A deadline kills at once
// with cell.KillOnTimeout.
//
// Errors: ErrBusy while another cell runs, ErrTimeout or ErrCanceled when
// ctx ended before anything was sent (the kernel is untouched in both
// cases); ErrClosed after the kernel died. Every other error means the
// kernel is dead, reaped, released and its staging dir removed: ErrTimeout,
// ErrCanceled or ErrInterrupted (the interrupted cell outlived its grace),
// ErrProtocol, or a *DeathError when the kernel died mid-cell. A cell that
// called sys.exit returns its Reply (ReplyExit) and the kernel is dead
// when Exec returns.
func (k *Kernel) Exec(ctx context.Context, cell Cell) (*Reply, error) {
	if err := k.acquire("kernel exec"); err != nil {
		return nil, err
	}
	defer k.busy.Store(false)
	if ctx.Err() != nil { // nothing was sent: the kernel is untouched
		return nil, fmt.Errorf("kernel exec: %w", ctxCause(ctx))
	}

	k.seq++
	n := k.seq
	id := strconv.Itoa(n)
	req, err := encodeRequest(id, cell.Code, cell.Stream != nil)
	if err == nil && len(cell.Env) > 0 {
		req, err = withEnv(req, cell.Env)
	}
	if err != nil {
		return nil, fmt.Errorf("kernel exec: %w", err)
	}
	started := time.Now()
	k.cell.begin(n, id, cell.Stream)
	rep, interrupted, err := k.run(ctx, req, cell)
	stdout, stderr, displays := k.cell.end()
	if err != nil {
		if stdout.total == 0 && stderr.total == 0 && len(displays) == 0 {
			return nil, err
		}
		// A killed cell keeps the fd-level output it already wrote
		// (Python-level prints die with the interpreter).
		reply := &Reply{Duration: time.Since(started), Displays: displays}
		reply.setStreams(stdout, stderr)
		return reply, err
	}
	reply := &Reply{
		Status:          rep.Status,
		Traceback:       rep.Traceback,
		Exception:       rep.exception(),
		ExitCode:        rep.ExitCode,
		ExecutionCount:  rep.ExecutionCount,
		Duration:        time.Since(started),
		Displays:        displays,
		DisplaysDropped: rep.DisplaysDropped,
		Interrupted:     interrupted,
	}
	reply.setStreams(wireSegment(rep.Stdout, rep.StdoutTail, rep.StdoutLen).then(stdout, k.tailCap),
		wireSegment(rep.Stderr, rep.StderrTail, rep.StderrLen).then(stderr, k.tailCap))
	if rep.Status == ReplyExit {
		// sys.exit ends the kernel: make sure nothing of it remains.
		k.terminate(fmt.Errorf("a cell called sys.exit(%d): %w", rep.ExitCode, ErrClosed))
		<-k.done
	}
	return reply, nil
}

// encodeRequest renders {"id":...,"code":...[,"stream":true]} as one line.
func encodeRequest(id, code string, stream bool) ([]byte, error) {
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
	if stream {
		buf.WriteString(`,"stream":true`)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// withEnv adds ,"env":{...} to an encoded request (its last bytes are
// "}\n"): the runner sets those variables for the cell and restores them
// after it.
func withEnv(req []byte, env map[string]string) ([]byte, error) {
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode request env: %w", err)
	}
	out := make([]byte, 0, len(req)+len(b)+8)
	out = append(out, req[:len(req)-2]...)
	out = append(out, `,"env":`...)
	out = append(out, b...)
	return append(out, "}\n"...), nil
}

// run writes the request and waits until the cell settles: both its reply
// frame and its stderr end marker arrived, or the kernel is gone. When ctx
// ends or Interrupt is called, the cell is interrupted (interrupted says
// why) and gets its grace before the kernel is killed.
func (k *Kernel) run(ctx context.Context, req []byte, cell Cell) (_ *wireReply, interrupted, _ error) {
	// The write can block on a kernel that stopped reading stdin; ctx's end
	// moves the write deadline into the past, which unblocks it.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = k.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	_, werr := k.stdin.Write(req)
	if !stop() {
		// ctx ended around the write: a kernel that stays (interrupted, or
		// the write was complete) must not keep the past deadline.
		<-fired
		_ = k.stdin.SetWriteDeadline(time.Time{})
	}
	if werr != nil && ctx.Err() != nil {
		return nil, nil, k.abort(ctxCause(ctx))
	}
	var grace, killAt, resend <-chan time.Time
	var ready <-chan struct{} // set once interrupted: signal once the cell began
	if werr != nil {
		// Most likely the kernel is exiting; let its exit status say why.
		grace = time.After(closedStdoutGrace)
	}
	var rep *wireReply
	eof, ctxDone, intr := k.stdoutEOF, ctx.Done(), k.cell.interruptRequested()
	for rep == nil {
		select {
		case rep = <-k.cell.settled:
		case <-eof:
			eof = nil
			grace = time.After(closedStdoutGrace)
		case <-grace:
			grace = nil
			k.terminate(fmt.Errorf("kernel exec: %w", protocolErr("the kernel closed its stdout or stdin")))
		case <-k.exited:
			rep, err := k.settleDead()
			return rep, nil, err
		case <-ctxDone:
			ctxDone = nil
			cause := ctxCause(ctx)
			if cell.KillOnTimeout && errors.Is(cause, ErrTimeout) {
				return nil, nil, k.abort(cause)
			}
			if interrupted == nil {
				interrupted, killAt, ready = cause, graceTimer(cell.Grace), k.cell.begunCh()
			}
		case <-intr:
			intr = nil
			if interrupted == nil {
				interrupted, killAt, ready = ErrInterrupted, graceTimer(cell.Grace), k.cell.begunCh()
			}
		case <-ready:
			ready = nil
			if !k.interrupt() {
				killAt = time.After(0)
			} else {
				resend = time.After(interruptResend)
			}
		case <-resend:
			resend = time.After(interruptResend)
			_ = signalInterrupt(k.cmd.Process.Pid)
		case <-killAt:
			return nil, nil, k.abort(interrupted)
		}
	}
	return rep, interrupted, nil
}

// settleDead waits for the teardown of a kernel that exited during a cell
// and returns the cell's reply if the runner sent it before exiting (with
// or without its stderr end mark).
func (k *Kernel) settleDead() (*wireReply, error) {
	<-k.done // the readers drained the pipes
	if rep := k.cell.frameUnsettled(); rep != nil {
		return rep, nil
	}
	return nil, k.Err()
}

// ctxCause is the kernel error for ctx's end.
func ctxCause(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ErrCanceled
}

// abort kills the kernel for cause and returns the error to report.
func (k *Kernel) abort(cause error) error {
	k.terminate(fmt.Errorf("kernel exec: %w", cause))
	<-k.done
	return k.Err()
}

// acquire claims the kernel for one exchange with the runner (a cell or a
// listing): ErrClosed once the kernel ended, ErrBusy while another
// exchange runs. The caller releases it with k.busy.Store(false).
func (k *Kernel) acquire(op string) error {
	select {
	case <-k.done:
		return fmt.Errorf("%s: %w", op, ErrClosed)
	default:
	}
	if !k.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: %w", op, ErrBusy)
	}
	return nil
}
