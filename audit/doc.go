// Package audit writes kernpool's audit log: one JSON line per settled
// cell (who ran what, where, and how it ended), with size-based rotation.
// It implements pool.Observer; pool/daemon wires it when `audit_log` is
// set.
//
// Writing never blocks a cell and costs it almost nothing: CellDone only
// queues the event (bounded in count and in the code it keeps alive); one
// writer goroutine hashes, encodes and writes the waiting lines every
// 100 ms in one write(2), and Close writes the rest. A line that cannot be
// queued or written is counted (Config.OnFailure, the
// kernpool_audit_write_failures_total metric) and the first failure of a
// run of failures is logged once.
package audit
