package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// maxToolOutput bounds what a tool-handler command may return (the API
// refuses bodies over 16 MiB).
const maxToolOutput = 8 << 20

// handlerWaitDelay bounds the wait for a canceled handler's pipes.
const handlerWaitDelay = time.Second

// shellToolHandler runs `sh -c cmd` (cmd /C on Windows) for each tool
// call, with the call as JSON ({"id","tool","args"}) on stdin. Its stdout
// is the result; a non-zero exit makes an error result carrying its stderr.
func shellToolHandler(cmdline string) pool.ToolHandler {
	return pool.ToolHandlerFunc(func(ctx context.Context, call pool.ToolCall) (string, error) {
		in, err := json.Marshal(call)
		if err != nil {
			return "", fmt.Errorf("encode tool call: %w", err)
		}
		cmd := handlerCommand(ctx, cmdline)
		// A grandchild that keeps the output pipes open must not hold the
		// call after it was canceled.
		cmd.WaitDelay = handlerWaitDelay
		var out, errb limitedBuffer
		out.limit, errb.limit = maxToolOutput, 64<<10
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &errb
		err = cmd.Run()
		var exitErr *exec.ExitError
		switch {
		case errors.As(err, &exitErr):
			msg := strings.TrimSpace(errb.String())
			if msg == "" {
				msg = exitErr.Error()
			}
			return "", fmt.Errorf("tool %s failed: %s", call.Tool, msg)
		case err != nil:
			return "", fmt.Errorf("tool %s: run handler: %w", call.Tool, err)
		case out.overflow:
			return "", fmt.Errorf("tool %s: handler output exceeds %d bytes", call.Tool, maxToolOutput)
		}
		return out.String(), nil
	})
}

// limitedBuffer keeps the first limit bytes and notes an overflow, so a
// runaway handler cannot exhaust memory. The buffer is a named field, not
// embedded: an embedded bytes.Buffer would promote ReadFrom, and io.Copy
// would bypass Write and its limit.
type limitedBuffer struct {
	buf      bytes.Buffer
	limit    int
	overflow bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); len(p) > room {
		b.overflow = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) String() string { return b.buf.String() }
