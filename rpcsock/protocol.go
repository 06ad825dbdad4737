package rpcsock

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Refusal texts of the wire contract (parity §4). A refused call gets
// {"error": <text>} and consumes no budget.
const (
	// MsgInvalidPrefix starts every malformed-request error.
	MsgInvalidPrefix = "Invalid RPC request: "
	// MsgUnauthorized answers a missing or wrong token.
	MsgUnauthorized = "Unauthorized RPC request"
	// MsgNoActiveCell answers a call while no cell runs (e.g. from a thread
	// an earlier cell left running).
	MsgNoActiveCell = "No active cell"
	// MsgNoHandler answers a call of a cell that was begun without a handler.
	MsgNoHandler = "No tool handler for this cell"
	// MsgCellSettled is the error a handler's cancellation is reported as
	// when its cell settled while the call ran.
	MsgCellSettled = "Tool call canceled: its cell has settled"
	// MsgTooManyConns answers (and closes) a connection over Config.MaxConns.
	MsgTooManyConns = "Tool RPC connection refused: this kernel already has its maximum number of connections open"
	// MsgOverBudget answers (and closes) a connection whose unfinished
	// request would pass the kernel's Config.MemoryBudget.
	MsgOverBudget = "Tool RPC connection dropped: this kernel's unfinished requests exceed its memory budget in the daemon"
)

// Sub-texts after MsgInvalidPrefix.
const (
	invalidTooLong  = "line too long"
	invalidUTF8     = "not valid UTF-8"
	invalidNotObj   = "not a JSON object"
	invalidToolType = "tool must be a string"
	invalidArgsType = "args must be a JSON object"
)

// UnknownToolMessage is the refusal of a tool outside the kernel's set; it
// names the available tools (sorted), like the reference does.
func UnknownToolMessage(tool string, available []string) string {
	list := "(none)"
	if len(available) > 0 {
		list = strings.Join(available, ", ")
	}
	return fmt.Sprintf("Tool '%s' is not available in this kernel. Available: %s", tool, list)
}

// LimitMessage is the refusal once a cell dispatched its whole budget.
func LimitMessage(budget int) string {
	return fmt.Sprintf("Tool call limit reached (%d)", budget)
}

// request is one decoded, authenticated request.
type request struct {
	tool string
	args json.RawMessage
}

// wireRequest is the request line as sent; fields stay raw so that each
// check can give its own error in the contract's order.
type wireRequest struct {
	Tool  json.RawMessage `json:"tool"`
	Args  json.RawMessage `json:"args"`
	Token json.RawMessage `json:"token"`
}

// parseRequest runs the checks that come before the tool set, in the
// contract's order: well-formed JSON object, then token (constant time;
// an empty server token fails closed), then field types. It returns the
// refusal text, or "" and the request.
func parseRequest(line []byte, token string) (request, string) {
	if !utf8.Valid(line) {
		return request{}, MsgInvalidPrefix + invalidUTF8
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return request{}, MsgInvalidPrefix + syntaxText(trimmed)
		}
		return request{}, MsgInvalidPrefix + invalidNotObj
	}
	var w wireRequest
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return request{}, MsgInvalidPrefix + syntaxText(trimmed)
	}
	if !tokenOK(w.Token, token) {
		return request{}, MsgUnauthorized
	}
	var tool string
	if err := json.Unmarshal(w.Tool, &tool); err != nil || len(w.Tool) == 0 || w.Tool[0] != '"' {
		return request{}, MsgInvalidPrefix + invalidToolType
	}
	args := bytes.TrimSpace(w.Args)
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
		args = json.RawMessage("{}")
	case args[0] != '{':
		return request{}, MsgInvalidPrefix + invalidArgsType
	}
	// Compact: handlers see one canonical spacing whatever the client sent
	// (args is a valid object here, so Compact cannot fail).
	var compact bytes.Buffer
	_ = json.Compact(&compact, args)
	return request{tool: tool, args: compact.Bytes()}, ""
}

// syntaxText describes why b is not a JSON object, from the decoder.
func syntaxText(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err.Error()
	}
	return invalidNotObj
}

// tokenOK compares the request's token with the server's in constant time.
// A non-string token, an empty server token or an empty request token fail.
func tokenOK(raw json.RawMessage, want string) bool {
	if want == "" || len(raw) == 0 || raw[0] != '"' {
		return false
	}
	var got string
	if json.Unmarshal(raw, &got) != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// errorReply renders a refusal or a failed call: {"error": text}.
func errorReply(text string) []byte { return encodeReply("error", text) }

// resultReply renders a tool's answer: {"result": text}.
func resultReply(text string) []byte { return encodeReply("result", text) }

// encodeReply renders one response line, {key: text}.
func encodeReply(key, text string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encoding a map of strings cannot fail.
	_ = enc.Encode(map[string]string{key: text})
	return buf.Bytes()
}

// idleNotice is written before an idle connection is dropped, only when
// nothing of a next request was read: a client that gets it in answer to a
// request knows that request was never read, so resending it is no replay.
const idleNotice = "{\"closed\":\"idle\"}\n"
