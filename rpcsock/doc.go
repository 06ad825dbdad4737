// Package rpcsock owns the tool-RPC channel of one kernel (parity §4): the
// listener the kernel's cells call back through, the per-cell authority that
// decides who answers those calls, and the generated Python module
// kernpool_tools that cells import. It is an adapter of the pool's tool
// seams and imports pool for them alone, using the pool's own types:
// *Server is a pool.ToolServer, Factory a pool.ToolServerFactory, and each
// call reaches the cell's pool.ToolHandler as a pool.ToolCall whose ID is
// unique per daemon ("call-<12 hex>-<n>": the listener's random prefix and
// a per-listener counter).
//
// # Listener
//
// POSIX: a Unix socket <staging>/rpc.sock, mode 0600, chowned to the
// kernel's uid, inside the kernel's 0700 staging dir (Listen refuses a dir
// with any group/other bit). Each accepted connection's peer uid is read
// with SO_PEERCRED (Linux) or LOCAL_PEERCRED (macOS, FreeBSD; what
// getpeereid reads) before a single byte is read, and a peer whose uid is
// not exactly the kernel's is closed. Root is not special: a root peer is
// refused unless the kernel runs as root. Platforms without a peer
// credential facility refuse Unix listeners (ErrUnsupported) rather than
// serve unverified peers.
//
// Windows (or Network "tcp"): loopback TCP on an ephemeral port, endpoint
// "tcp://127.0.0.1:PORT". The token is then the only guard; it is the first
// check after the line parses, so a peer without it learns nothing else.
//
// # Wire
//
// Newline-delimited JSON, one request and one reply line at a time per
// connection; a cell may open many connections (one per thread).
//
//	request: {"tool": "web_search", "args": {...}, "token": "..."}
//	reply:   {"result": "<string>"}  or  {"error": "<text>"}
//
// Checks, in order; every refusal is an error reply, consumes no budget and
// leaves the connection usable:
//
//  1. line over MaxLineBytes (1 MiB) -> "Invalid RPC request: line too long"
//     (the line is skipped to its newline); invalid UTF-8, invalid JSON or
//     not an object -> "Invalid RPC request: <reason>" (the reason is the
//     JSON decoder's message, "not valid UTF-8" or "not a JSON object").
//  2. token missing, not a string or wrong (crypto/subtle compare; an
//     empty server token fails closed) -> "Unauthorized RPC request".
//  3. tool not a string -> "Invalid RPC request: tool must be a string";
//     args neither absent, null nor an object -> "Invalid RPC request: args
//     must be a JSON object".
//  4. tool outside the kernel's set -> "Tool 'X' is not available in this
//     kernel. Available: a, b" (sorted; "(none)" for an empty set). The
//     reference says "in execute_code"; kernpool has no such tool name.
//  5. no cell active -> "No active cell"; a cell begun without a handler
//     -> "No tool handler for this cell".
//  6. the cell's budget spent -> "Tool call limit reached (N)".
//
// A call that passes is counted against its cell and dispatched to the
// cell's pool.ToolHandler with a context canceled when the cell settles; a handler
// error becomes {"error": err.Error()}, a cancellation after the cell
// settled becomes "Tool call canceled: its cell has settled", a panic
// becomes "tool handler failed". Blank lines are ignored.
//
// Bounds: at most MaxConns (4) connections per kernel; more get
// {"error": MsgTooManyConns} and are closed unread. Each connection has a
// fixed 64 KiB read buffer; longer lines are assembled in buffers that
// grow only as bytes arrive, charged to one MemoryBudget (2 MiB) shared
// by the kernel's connections; a connection whose line
// would pass it gets {"error": MsgOverBudget} and is closed. The stub reads
// such a reply even when the close broke its send, and raises it as
// ToolError.
//
// A connection that sends nothing for IdleTimeout (300 s) is dropped. When
// no byte of a next request was read, the server first writes the idle
// notice {"closed": "idle"}: a client that receives it in answer to a
// request knows the request was never read and may send it again. This
// notice is kernpool's addition to the reference wire.
//
// # Authority
//
// BeginCell installs a cell's handler and budget (default 50) before the
// cell is sent to the kernel; its end func retires them on every settle
// path. Calls from a thread a settled cell left running are refused; a later
// cell's calls reach only the later cell's handler. end reports the number
// of dispatched calls (the result's tool_calls_made).
//
// # kernpool_tools
//
// Stub generates the module (written as kernpool_tools.py in the staging
// dir). It reads the endpoint and token from the runner's private module
// _kernpool_runtime (rpc_endpoint, rpc_token), falling back to the
// KERNPOOL_RPC_ENDPOINT/KERNPOOL_RPC_TOKEN environment variables only when
// that module is absent. It offers one function per tool (see PyIdent and
// FunctionNames for the name mapping, FUNCTIONS in the module for the
// result) and call(name, args=None, **kwargs); _timeout (seconds, default
// 300) and _raw are reserved keyword names. A result that is JSON text is
// returned decoded (as the reference does), otherwise as the string; _raw
// returns the string. Errors raise ToolError, timeouts ToolTimeout (also a
// TimeoutError).
//
// Connections are pooled, at most MAX_CONNECTIONS (DefaultMaxConns) at
// once; more threads wait their turn (within their timeout). Each call
// takes an idle connection (or dials),
// holds that connection's lock for the send and the reply, and returns it.
// A pooled connection with anything readable (the idle notice or EOF) is
// discarded before use. After the request was sent, the call is sent once
// more on a fresh connection only when the server provably did not read it:
// the idle notice came back, the send failed with EPIPE/ECONNRESET, or the
// connection was reset before any reply byte (the server resets only when
// it closes with our request unread). A plain EOF after the request, a
// partial reply or a timeout raise without resending: the call may have
// run. After fork the child starts with an empty pool.
package rpcsock
