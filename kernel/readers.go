package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// wireReply is the runner's reply frame, decoded once.
type wireReply struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Stdout         string `json:"stdout"`
	Stderr         string `json:"stderr"`
	StdoutClipped  bool   `json:"stdout_clipped"`
	StdoutLen      int    `json:"stdout_len"`
	StderrClipped  bool   `json:"stderr_clipped"`
	Traceback      string `json:"traceback"`
	ExitCode       int    `json:"exit_code"`
	ExecutionCount int    `json:"execution_count"`
	StderrClosed   bool   `json:"stderr_closed"`
}

// readStdout splits stdout into reply frames and raw output. A protocol
// violation kills the kernel; EOF (or a read error) closes stdoutEOF.
func (k *Kernel) readStdout() {
	defer k.readers.Done()
	defer close(k.stdoutEOF)
	s := newScanner(k.stdoutR, []byte("\n"+k.sentinel+" "), &k.cell.epoch)
	err := s.run(k.cell.rawStdout, func(n int64) error {
		if n > k.maxFrame {
			return protocolErr(fmt.Sprintf("frame of %d bytes exceeds the %s limit", n, FormatBytes(k.maxFrame)))
		}
		body, err := s.readBody(n)
		if err != nil {
			return err
		}
		rep, err := decodeReply(body)
		if err != nil {
			return err
		}
		return k.cell.frame(rep)
	})
	if errors.Is(err, ErrProtocol) {
		k.log.Warn("kernel broke the protocol", "id", k.id, "error", err)
		k.terminate(fmt.Errorf("kernel exec: %w", err))
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
		k.log.Debug("kernel stdout read failed", "id", k.id, "error", err)
	}
}

// decodeReply checks that body is one JSON object and decodes it.
func decodeReply(body []byte) (*wireReply, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, protocolErr("frame is not a JSON object")
	}
	rep := new(wireReply)
	if err := json.Unmarshal(body, rep); err != nil {
		return nil, protocolErr("frame is not a valid reply: " + err.Error())
	}
	switch rep.Status {
	case "ok", "error", "exit":
	default:
		return nil, protocolErr("reply has unknown status " + quote(rep.Status))
	}
	return rep, nil
}

// readStderr records stderr and turns the runner's end-of-cell markers into
// marks on the active cell.
func (k *Kernel) readStderr() {
	defer k.readers.Done()
	s := newScanner(k.stderrR, []byte("\n"+k.sentinel+" E "), &k.cell.epoch)
	err := s.run(k.cell.rawStderr, func(n int64) error {
		k.cell.mark(n)
		return nil
	})
	if errors.Is(err, ErrProtocol) {
		k.log.Warn("kernel broke the protocol", "id", k.id, "error", err)
		k.terminate(fmt.Errorf("kernel exec: %w", err))
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
		k.log.Debug("kernel stderr read failed", "id", k.id, "error", err)
	}
}
