// Package memtest measures, for tests, how much resident memory this
// process gains while an attack runs: the peak RSS (VmHWM, reset through
// /proc/self/clear_refs before the attack) minus the RSS before it.
package memtest
