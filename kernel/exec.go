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
	req, err := k.req.encode(id, cell.Code, cell.Stream != nil)
	defer k.req.release()
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
	return new(reqEncoder).encode(id, code, stream)
}

// reqEncoder renders Exec's requests into one buffer kept from cell to
// cell (Exec holds the kernel busy while it uses it): a cell allocates
// nothing for its request.
type reqEncoder struct {
	buf  bytes.Buffer
	enc  *json.Encoder // writes to buf
	code string        // what enc encodes, through a pointer: no boxing
}

// maxKeptRequest bounds the buffer kept between cells: one big cell must
// not hold its size for the kernel's life.
const maxKeptRequest = 64 << 10

// encode renders a request; the bytes are valid until the next encode.
func (e *reqEncoder) encode(id, code string, stream bool) ([]byte, error) {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf)
		e.enc.SetEscapeHTML(false)
	}
	e.buf.Reset()
	e.buf.Grow(len(code) + 32)
	e.buf.WriteString(`{"id":"`)
	e.buf.WriteString(id)
	e.buf.WriteString(`","code":`)
	e.code = code
	err := e.enc.Encode(&e.code) // appends '\n'
	e.code = ""
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	e.buf.Truncate(e.buf.Len() - 1)
	if stream {
		e.buf.WriteString(`,"stream":true`)
	}
	e.buf.WriteString("}\n")
	return e.buf.Bytes(), nil
}

// release drops a buffer grown past maxKeptRequest.
func (e *reqEncoder) release() {
	if e.buf.Cap() > maxKeptRequest {
		e.buf = bytes.Buffer{}
	}
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
	// A request the pipe takes at once (the runner reads each before it
	// answers) needs nothing armed on ctx: only a rest that must wait does.
	var werr error
	if n := k.stdinW.tryWrite(req); n < len(req) {
		werr = k.write(ctx, req[n:])
	}
	if werr != nil && ctx.Err() != nil {
		return nil, nil, k.abort(ctxCause(ctx))
	}
	return k.wait(ctx, werr, cell)
}

// write writes req to the request pipe, waiting for room. The write can
// block on a kernel that stopped reading stdin; ctx's end moves the write
// deadline into the past, which unblocks it.
func (k *Kernel) write(ctx context.Context, req []byte) error {
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
	return werr
}

// wait is run's wait for the cell to settle (werr: the request's write
// failed).
func (k *Kernel) wait(ctx context.Context, werr error, cell Cell) (_ *wireReply, interrupted, _ error) {
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
