package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernpool/kernpool/pool"
)

// sandboxCollector exposes a sandbox factory's housekeeping figures
// (pool.SandboxStats), read at each scrape; zero until WatchSandboxes.
type sandboxCollector struct {
	src                                   atomic.Pointer[func() pool.SandboxStats]
	scrubs, removed, bounded, failed      *prometheus.Desc
	hostPaths, hostPathDirs, hostPathWalk *prometheus.Desc
}

func newSandboxCollector() *sandboxCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &sandboxCollector{
		scrubs:  desc("uid_scrubs_total", "Scrubs of a kernel uid's leftovers in the host's world-writable dirs, one per uid lease."),
		removed: desc("uid_scrub_removed_entries_total", "Files and dirs the uid scrubs removed."),
		bounded: desc("uid_scrub_bounded_total", "Uid scrubs that stopped at a bound (the uid was leased anyway; the next lease's scrub goes on)."),
		failed:  desc("uid_scrub_errors_total", "Uid scrubs that met an error (the uid was leased anyway; the log names it)."),
		hostPaths: desc("host_paths", "Host dirs kernels could write, found at start, by what every kernel gets there: private (a tmpfs of its own) or read_only (a read-only bind).",
			"kind"),
		hostPathDirs: desc("host_path_walk_dirs", "Directories the start's walk for kernel-writable host paths looked at."),
		hostPathWalk: desc("host_path_walk_seconds", "How long the start's walk for kernel-writable host paths took."),
	}
}

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.scrubs, c.removed, c.bounded, c.failed, c.hostPaths, c.hostPathDirs, c.hostPathWalk} {
		ch <- d
	}
}

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	var st pool.SandboxStats
	if src := c.src.Load(); src != nil {
		st = (*src)()
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.scrubs, st.UIDScrubs)
	counter(c.removed, st.ScrubRemoved)
	counter(c.bounded, st.ScrubBounded)
	counter(c.failed, st.ScrubErrors)
	ch <- prometheus.MustNewConstMetric(c.hostPaths, prometheus.GaugeValue, float64(st.HostPathsPrivate), "private")
	ch <- prometheus.MustNewConstMetric(c.hostPaths, prometheus.GaugeValue, float64(st.HostPathsReadOnly), "read_only")
	ch <- prometheus.MustNewConstMetric(c.hostPathDirs, prometheus.GaugeValue, float64(st.HostPathDirs))
	ch <- prometheus.MustNewConstMetric(c.hostPathWalk, prometheus.GaugeValue, st.HostPathWalk.Seconds())
}

// WatchSandboxes makes the sandbox series read src (a
// pool.SandboxStatser's SandboxStats) at each scrape; until then they are
// zero. Safe to call while scrapes run.
func (m *Metrics) WatchSandboxes(src func() pool.SandboxStats) { m.sandbox.src.Store(&src) }
