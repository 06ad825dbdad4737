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
// OutputFilterFactory, ToolServerFactory), so it builds and tests alone.
//
// Locking: one registry mutex guards the map, the LRU order and the counters;
// it is never held across a spawn, a cell or a teardown. Each kernel carries a
// one-slot channel semaphore that serializes its cells and respects the
// caller's context while waiting.
package pool
