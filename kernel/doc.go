// Package kernel owns one live, session-persistent Python kernel: its
// staging dir, the embedded runner (runner.py), the spawn in a Sandbox, the
// sentinel framing on the kernel's pipes, cell execution and teardown.
//
// # Wire protocol
//
// The host writes one JSON object {"id","code"} per line to the runner's
// stdin. For each request the runner writes, in order:
//
//	stderr: "\n" SENTINEL " E " <execution_count> "\n"
//	stdout: "\n" SENTINEL " " <len(body)> "\n" <body>
//
// body is a compact UTF-8 JSON object (see wireReply). The per-kernel random
// SENTINEL never reaches cells (the runner deletes it from os.environ), so a
// cell cannot forge frames by accident. Bytes outside frames are fd-level
// output (a subprocess's): they belong to the running cell and are dropped
// between cells. A marker not followed by "<digits>\n" is output. A frame
// longer than Spec.MaxFrameBytes is refused from its header, before its body
// is read; a frame that is not a JSON object reply is a protocol error.
// Exec settles when both the frame and the stderr marker arrived, so a
// subprocess's stderr is attributed to its cell; it never polls.
//
// # Lifecycle
//
// Start creates <StateDir>/kernels/<ID>, starts the runner and returns.
// Three goroutines serve a kernel: the stdout and stderr readers and the
// reaper, which on the runner's exit kills the rest of its tree
// (Sandbox.Kill), drains and closes the pipes, calls Sandbox.Release once
// (OOM verdict), removes the staging dir and closes Done. Every teardown
// path (Kill, timeout, cancel, protocol error, sys.exit, death) goes through
// it. The runner kills its own process group when its stdin ends (the host
// died), and the host sets Pdeathsig on Linux.
package kernel
