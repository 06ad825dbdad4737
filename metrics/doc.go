// Package metrics is kernpool's Prometheus adapter: it implements
// pool.Observer with client_golang collectors and serves them in the text
// exposition format (GET /metrics on the API socket, and on the optional
// TCP listener of `serve --metrics-listen`).
//
// Labels are bounded by the configuration: mode (a configured profile),
// status, end reason, refusal, tool-call outcome and host-path kind.
// Owners, kernel ids and code never become label values (cardinality and
// privacy); per-owner
// figures stay in `kernpool ps`. docs/ops.md ("Metrics") lists every
// series.
package metrics
