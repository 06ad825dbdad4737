// Package daemon is the kernpool daemon as a library: the HCL
// configuration (Config, documented in docs/config.md), the wiring of the
// concrete isolation (isolate, cgroup), environment (envscrub), tool-RPC
// (rpcsock), metrics and audit packages into a pool (wire.go is the only
// place that does it), and the HTTP API server's lifecycle: New builds a
// ready, sandboxed pool and fails closed, Serve serves it, Shutdown
// drains it, Reload applies new limits and quotas.
//
// `kernpool serve` (cmd/kernpool) is flags plus this package. A Go
// gateway embeds the same daemon:
//
//	func main() {
//		kinit.Main() // the kernel init step re-executes this binary
//		cfg := daemon.DefaultConfig()
//		cfg.StateDir = "/var/lib/mygateway/kernpool"
//		d, err := daemon.New(ctx, cfg)
//		...
//		ln, err := d.Listen()
//		go d.Serve(ln)
//		...
//		d.Shutdown(ctx)
//	}
//
// pool.New alone gives kernels without a sandbox or redaction; this
// package is how an embedder gets the same protections as the daemon.
package daemon
