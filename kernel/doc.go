// Package kernel owns one live, session-persistent Python kernel: its
// staging dir, the embedded runner (runner.py and the _kernpool_*.py modules
// it loads: boot, displays, errors, shell lines), the spawn in a Sandbox,
// the sentinel framing on the kernel's pipes, cell execution and teardown.
//
// A cell's exception comes back structured (Exception: ename, evalue and
// the traceback entries, without kernpool's frames or the staging path);
// each stream keeps its first bytes (Spec.StdoutCap, RawStdoutCap,
// StderrCap) and its last (TailBytes); a cell that is not Python but has
// `!` shell lines or `%` magics is rewritten by IPython's transformer.
//
// # Wire protocol
//
// The host writes one JSON object {"id","code"} per line to the runner's
// stdin (with "op": "vars" for a variables listing, "checkpoint.*" for the
// checkpoint requests of checkpoint.go, whose "code" carries the argument).
// Checkpoint blobs move raw: a restore's as "C " <size> "\n" and the bytes
// on stdin before the load request, a save's as a C frame on stdout
// ("\n" SENTINEL " C " <size> "\n" and the bytes) before the save's
// reply, accepted only while a save runs and refused from its header
// past the save's limit. For each request the runner writes, in order:
//
//	... the cell is compiled ...
//	stdout and stderr: "\n" SENTINEL " B " <execution_count> "\n"  (begin)
//	... the cell runs ...
//	stderr: "\n" SENTINEL " E " <execution_count> "\n"            (end)
//	stdout: "\n" SENTINEL " " <len(body)> "\n" <body>             (reply)
//
// The runner flushes Python's stdout and stderr buffers before the begin
// markers: what threads of earlier cells wrote lands before them, was
// written while no cell ran, and is dropped and counted
// (Kernel.DroppedOutput), never delivered. The markers follow the compile
// (which writes nothing at the fd level): a quick cell's markers then
// reach the host with its reply, one wake-up of each reader, not two.
//
// body is a compact UTF-8 JSON object (see wireReply); members at their
// zero value may be left out (a quiet cell's frame is id, status and
// execution_count). The per-kernel random
// SENTINEL never reaches cells (it comes on the request pipe, never in the
// environment, and stays in the runner's locals), so a
// cell cannot forge frames by accident. Bytes outside frames are fd-level
// output (a subprocess's): they belong to the running cell and are dropped
// between cells. A marker not followed by a header is output. A frame
// longer than Spec.MaxFrameBytes (by default the runner's worst case,
// derived in caps.go from the caps the runner gets) is refused from its
// header, before any of its body is read; the body is then decoded as it
// streams, each member capped, every byte charged to the kernel's Budget;
// a frame that is not a JSON object reply is a protocol error.
// Exec settles when both the frame and the stderr marker arrived, so a
// subprocess's stderr is attributed to its cell; it never polls, and it
// wakes once per cell: whichever reader completes the pair hands it the
// reply.
//
// # Lifecycle
//
// Start creates <StateDir>/kernels/<ID>, starts the runner and returns.
// Three goroutines serve a kernel: the stdout and stderr readers and the
// reaper, which on the runner's exit kills the rest of its tree
// (Sandbox.Kill), drains and closes the pipes, calls Sandbox.Release once
// (OOM verdict), removes the staging dir and closes Done. Every teardown
// path (Kill, timeout, cancel, protocol error, sys.exit, death) goes through
// it.
//
// # Dying with the host
//
// Three layers make a kernel die with its host, even a SIGKILLed one:
// the runner kills its process group (and writes cgroup.kill when the
// sandbox gave one) when its request pipe ends, seen by the main thread
// between cells and by a thread waiting for the pipe's hang-up during one; the
// host sets Pdeathsig SIGKILL (Linux), which also covers a cell holding the
// GIL in C code, and starts each kernel from a goroutine locked to its own
// OS thread for the kernel's lifetime, because Pdeathsig follows the forking
// thread and Go ends threads whose locked goroutine exits; and, since
// Pdeathsig kills only the runner, a watchdog process forked by the runner
// before any user code waits on a pidfd of the runner and then kills the
// group (and cgroup), so the cell's children die too. The watchdog is a
// child of the runner: a cell that waits for all of its children with
// os.wait() in a loop would wait for it as well.
//
// # File descriptors
//
// The child gets fds 0-2 only; the runner closes any other inherited fd
// before user code (a daemon's parent may leak some), then moves the request
// pipe to a private non-inheritable fd and points fd 0 at /dev/null, so
// neither input() nor a subprocess can read (steal) requests. fd 1 and 2
// stay the host's pipes: a subprocess's output reaches the cell's reply.
package kernel
