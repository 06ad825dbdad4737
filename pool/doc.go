// Package pool is kernpool's registry of live session kernels.
//
// It owns the key → kernel map (key: owner, mode, interpreter, cwd, sorted
// deduplicated tool names), the per-kernel serialization of cells, reset,
// the live-kernel cap with LRU eviction across owners, the idle reaper,
// owner shutdown, drain on Close, and the assembly of a settled cell into a
// Result in the reference's shape (parity §3).
//
// It drives package kernel for one kernel's process and reaches the other
// layers only through the seams in seams.go (SandboxFactory, EnvBuilder,
// OutputFilterFactory, ToolServerFactory, Observer), so it builds and tests
// without them: the adapters (isolate, envscrub, rpcsock, audit, metrics)
// import pool and satisfy the seams with its own types. Tests that use the
// real adapters are therefore in the external package pool_test
// (export_test.go lends them the package's test helpers); the package's
// own tests that need a real sandbox get isolate's through RealSandboxes,
// which pool_test sets.
// Every seam may be nil: kernels then run as plain process groups with a
// minimal environment (Config.Env), unfiltered output, and tool sets are
// refused.
//
// Locking: one registry mutex guards the map, the LRU order and the
// counters; it is never held across a spawn, a cell or a teardown (doomed
// kernels are taken out under the lock and killed outside it). Each key has
// a slot with a one-slot channel semaphore that serializes its cells: the
// holder may run a cell, reset or respawn the kernel; a waiter whose ctx
// ends leaves without touching the kernel. A slot is counted against
// MaxKernels from the moment it is created, so two calls on one key never
// spawn two kernels and a spawn never exceeds the cap.
//
// Results: every cell outcome is a Result, worded as the reference words
// it. An exception keeps the kernel (status "error", exit code 1, output =
// stdout + "\n--- stderr ---\n" + stderr + traceback; Result.Exception
// holds it structured, Result.Stdout and Result.Stderr the streams apart). A timeout, a cancel
// or a kill by Kill/ShutdownOwner/Close kills the kernel tree and says the
// state was lost (status "timeout" or "interrupted", exit code -1). A
// kernel that dies mid-cell reports its stderr tail, or the out-of-memory
// verdict of its sandbox. sys.exit ends the kernel (kernel.ended). Output
// printed at the Python level by a cell that is killed is lost with the
// kernel, as in the reference; fd-level output the kernel package returns
// with the error is kept.
//
// Lossless eviction (persist.go, checkpoint.go; docs/design.md): for modes
// whose CellPolicy has Persist, eviction, idle reaping and Close first
// checkpoint the kernel (inside it, as opaque bytes to the pool) into a
// per-key file under <StateDir>/checkpoints, and Pool.restore loads it into
// the key's next kernel before its first cell.
package pool
