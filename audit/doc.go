// Package audit writes kernpool's audit log: one JSON line per settled
// cell (who ran what, where, and how it ended), with size-based rotation.
// It implements pool.Observer; cmd/kernpool wires it when `audit_log` is
// set.
//
// Writing never blocks a cell: lines go through a bounded queue to one
// writer goroutine. A line that cannot be queued or written is counted
// (Config.OnFailure, the kernpool_audit_write_failures_total metric) and
// the first failure of a run of failures is logged once.
package audit
