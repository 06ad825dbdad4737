package kernel

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// readStdout splits stdout into reply frames and raw output. A protocol
// violation kills the kernel; EOF (or a read error) closes stdoutEOF.
func (k *Kernel) readStdout() {
	defer k.readers.Done()
	defer close(k.stdoutEOF)
	s := newScanner(k.stdoutR, []byte("\n"+k.sentinel+" "), " BCDK", &k.cell.epoch)
	err := s.run(k.cell.rawStdout, func(kind byte, n int64) error {
		switch kind {
		case 'B':
			k.cell.begun(false, n)
			return nil
		case 'K': // keeps a streamed line's newline from being held back
			return nil
		case 'C':
			return k.ckptIn.data(s.body(n), n)
		case 'D':
			if n > DisplayBytes {
				return protocolErr(fmt.Sprintf("a display of %d bytes exceeds the %d-byte limit", n, DisplayBytes))
			}
			d, err := decodeDisplay(s.body(n), n, &k.cell.acct)
			if err == nil {
				k.cell.display(d)
			}
			return err
		}
		if n > k.maxFrame {
			return protocolErr(fmt.Sprintf("a reply frame of %d bytes exceeds the %d-byte limit", n, k.maxFrame))
		}
		if err := k.cell.wantsFrame(); err != nil {
			return err
		}
		rep, err := decodeFrame(s.body(n), &k.cell.acct, k.caps)
		if err != nil {
			return err
		}
		return k.cell.frame(rep)
	})
	k.readerEnded("stdout", err)
}

// readStderr records stderr and turns the runner's end-of-cell markers into
// marks on the active cell.
func (k *Kernel) readStderr() {
	defer k.readers.Done()
	s := newScanner(k.stderrR, []byte("\n"+k.sentinel+" "), "BEHK", &k.cell.epoch)
	err := s.run(k.cell.rawStderr, func(kind byte, n int64) error {
		switch kind {
		case 'B':
			k.cell.begun(true, n)
		case 'H':
			k.cell.helper(n)
		case 'K':
		default:
			k.cell.mark(n)
		}
		return nil
	})
	k.readerEnded("stderr", err)
}

// readerEnded handles the error that ended the reader of stream: a broken
// protocol kills the kernel; the end of the pipe is the normal end.
func (k *Kernel) readerEnded(stream string, err error) {
	if errors.Is(err, ErrProtocol) {
		k.log.Warn("kernel broke the protocol", "id", k.id, "error", err)
		k.terminate(fmt.Errorf("kernel exec: %w", err))
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
		k.log.Debug("kernel "+stream+" read failed", "id", k.id, "error", err)
	}
}
