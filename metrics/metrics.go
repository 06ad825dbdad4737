package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kernpool/kernpool/pool"
)

// namespace prefixes every kernpool series.
const namespace = "kernpool"

// Buckets of the histograms.
var (
	// durationBuckets span a trivial cell (ms) to the default timeout (5m).
	durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// byteBuckets span 1 KiB to 64 MiB in powers of four.
	byteBuckets = prometheus.ExponentialBuckets(1024, 4, 9)
)

// Metrics is the daemon's Prometheus registry and the pool.Observer that
// feeds it. Create it with New; safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	cells, kernelStarts, kernelEnds, spawnFailures *prometheus.CounterVec
	oomKills, refusals, toolCalls                  *prometheus.CounterVec
	cellDuration                                   *prometheus.HistogramVec
	live, spares                                   *prometheus.GaugeVec
	outputBytes, droppedBytes, spillBytes          prometheus.Counter
	betweenCellsBytes                              prometheus.Counter
	redactions, auditFailures                      prometheus.Counter
	daemonBytes                                    prometheus.Histogram
	sandbox                                        *sandboxCollector
}

var _ pool.Observer = (*Metrics)(nil)

// New registers every kernpool series (and the Go runtime and process
// collectors). modes are the configured modes: their series exist at 0
// from the start, so alerts and rate() see them before the first event.
func New(version, revision string, modes []string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), sandbox: newSandboxCollector()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	m.cells = counter("cells_total", "Cells settled, by mode and status (success, error, timeout, interrupted).", "mode", "status")
	m.kernelStarts = counter("kernel_starts_total", "Kernels started, by mode.", "mode")
	m.kernelEnds = counter("kernel_ends_total", "Kernels torn down, by mode and reason (idle, lru, oom, timeout, interrupt, exit, shutdown, crash, reset).", "mode", "reason")
	m.spawnFailures = counter("spawn_failures_total", "Kernels that failed to start, by mode.", "mode")
	m.oomKills = counter("oom_kills_total", "Kernels killed at their memory limit while running a cell or a variables listing, by mode.", "mode")
	m.refusals = counter("refusals_total", "Requests refused before running, by reason (capacity: every kernel busy at max_kernels; quota: a per-owner quota).", "reason")
	m.toolCalls = counter("tool_calls_total", "Tool calls forwarded to a client, by outcome (ok, error).", "outcome")
	m.cellDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "cell_duration_seconds", Help: "Wall time of a cell call (queueing and spawn included), by mode.",
		Buckets: durationBuckets,
	}, []string{"mode"})
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, []string{"mode"})
	}
	m.live = gauge("kernels_live", "Live kernels, by mode.")
	m.spares = gauge("kernels_spare", "Warm spare kernels ready for a new key, by mode (not in kernels_live; a claimed spare counts as a kernel start once bound).")
	plain := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	m.outputBytes = plain("output_bytes_total", "Bytes of stdout and stderr cells produced, before caps.")
	m.droppedBytes = plain("dropped_bytes_total", "Output bytes the inline caps left out of results.")
	m.betweenCellsBytes = plain("output_between_cells_dropped_bytes_total", "Output kernels wrote while none of their cells ran (a thread or process of an earlier cell): dropped, never in a result; counted at the kernel's next cell.")
	m.spillBytes = plain("spill_bytes_total", "Bytes written to stdout spill files.")
	m.redactions = plain("redactions_total", "Secrets masked in cell output.")
	m.auditFailures = plain("audit_write_failures_total", "Audit log lines that could not be written.")
	m.daemonBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "kernel_daemon_memory_bytes",
		Help:    "Memory the daemon buffered for one kernel's cell reply (stdout, stderr, traceback), per cell.",
		Buckets: byteBuckets,
	})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels carry the daemon's version and VCS revision."}, []string{"version", "revision"})
	build.WithLabelValues(version, revision).Set(1)
	m.reg.MustRegister(m.cells, m.kernelStarts, m.kernelEnds, m.spawnFailures, m.oomKills, m.refusals,
		m.toolCalls, m.cellDuration, m.live, m.spares, m.outputBytes, m.droppedBytes, m.betweenCellsBytes, m.spillBytes,
		m.redactions, m.auditFailures, m.daemonBytes, build, m.sandbox,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.precreate(modes)
	return m
}

// precreate makes every labelled series of modes exist at zero.
func (m *Metrics) precreate(modes []string) {
	for _, mode := range modes {
		for _, st := range pool.Statuses() {
			m.cells.WithLabelValues(mode, string(st))
		}
		for _, r := range pool.EndReasons() {
			m.kernelEnds.WithLabelValues(mode, string(r))
		}
		m.kernelStarts.WithLabelValues(mode)
		m.spawnFailures.WithLabelValues(mode)
		m.oomKills.WithLabelValues(mode)
		m.cellDuration.WithLabelValues(mode)
		m.live.WithLabelValues(mode)
		m.spares.WithLabelValues(mode)
	}
	for _, r := range []pool.Refusal{pool.RefusedCapacity, pool.RefusedQuota} {
		m.refusals.WithLabelValues(string(r))
	}
	for _, o := range []pool.ToolOutcome{pool.ToolOK, pool.ToolError} {
		m.toolCalls.WithLabelValues(string(o))
	}
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// AuditWriteFailed counts one audit line that could not be written.
func (m *Metrics) AuditWriteFailed() { m.auditFailures.Inc() }

// KernelStarted implements pool.Observer.
func (m *Metrics) KernelStarted(mode string) {
	m.kernelStarts.WithLabelValues(mode).Inc()
	m.live.WithLabelValues(mode).Inc()
}

// KernelEnded implements pool.Observer.
func (m *Metrics) KernelEnded(mode string, reason pool.EndReason) {
	m.kernelEnds.WithLabelValues(mode, string(reason)).Inc()
	m.live.WithLabelValues(mode).Dec()
	// Counted at the teardown, where the pool decided the kernel's end
	// once: a cell's OOM and a listing's (a repr's) alike.
	if reason == pool.EndOOM {
		m.oomKills.WithLabelValues(mode).Inc()
	}
}

// SparesChanged implements pool.Observer.
func (m *Metrics) SparesChanged(mode string, delta int) {
	m.spares.WithLabelValues(mode).Add(float64(delta))
}

// SpawnFailed implements pool.Observer.
func (m *Metrics) SpawnFailed(mode string) { m.spawnFailures.WithLabelValues(mode).Inc() }

// Refused implements pool.Observer.
func (m *Metrics) Refused(_ string, why pool.Refusal) { m.refusals.WithLabelValues(string(why)).Inc() }

// CellDone implements pool.Observer.
func (m *Metrics) CellDone(ev *pool.CellEvent) {
	m.cells.WithLabelValues(ev.Mode, string(ev.Status)).Inc()
	m.cellDuration.WithLabelValues(ev.Mode).Observe(ev.Duration.Seconds())
	for outcome, n := range ev.ToolOutcomes {
		m.toolCalls.WithLabelValues(string(outcome)).Add(float64(n))
	}
	m.outputBytes.Add(float64(ev.OutputBytes))
	m.droppedBytes.Add(float64(ev.DroppedBytes))
	m.betweenCellsBytes.Add(float64(ev.BetweenCellsBytes))
	m.spillBytes.Add(float64(ev.SpillBytes))
	if ev.Redactions > 0 {
		m.redactions.Add(float64(ev.Redactions))
	}
	if ev.KernelID != "" {
		m.daemonBytes.Observe(float64(ev.ReplyBytes))
	}
}
