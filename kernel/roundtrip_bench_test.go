//go:build linux

package kernel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// BenchmarkRoundTrip times one warm cell (x=1) three ways on the real
// runner, interleaved in one run:
//
//   - kernpool: Kernel.Exec (BenchmarkExecWarm's cell);
//   - gosync: the same runner, spawned the same way, driven by a minimal
//     synchronous Go loop that writes the request and reads the frame and
//     the stderr end mark with blocking reads on the same pipes: the host
//     side's floor;
//   - pyhost: the same runner driven by a single-threaded Python host
//     speaking the same protocol with synchronous reads (the design of a
//     host written in Python).
//
// The three take turns in blocks of roundTripBlock back-to-back cells,
// in a rotating order (-count repeats each sub-benchmark on its own, so it
// would compare one minute of a shared machine with another). It reports
// each host's median time per cell over the blocks (ns/op is kernpool's),
// the medians of kernpool's ratio to the others within a round, and the
// host CPU and context switches per cell of the two Go hosts (this
// process's, per block).
//
// Each runs in two wake-up regimes: halt (idle vCPUs sleep, so every
// wake-up pays for waking one) and spin (a niced busy loop keeps the
// other vCPU running, so wake-ups are cheap).
func BenchmarkRoundTrip(b *testing.B) {
	testenv.RequirePython(b)
	for _, regime := range []string{"halt", "spin"} {
		b.Run(regime, func(b *testing.B) {
			hosts := []roundTripHost{kernpoolHost(b), goSyncHost(b), pyHostRunner(b)}
			if regime == "spin" {
				defer startSpinner(b)()
			}
			b.ResetTimer()
			perCell := make([][]float64, len(hosts)) // ns per cell, per block
			cpu := make([][]float64, len(hosts))     // host CPU ns per cell, per block
			cs := make([][]float64, len(hosts))      // host context switches per cell, per block
			for round := 0; round*roundTripBlock < b.N; round++ {
				n := min(roundTripBlock, b.N-round*roundTripBlock)
				for j := range hosts {
					i := (round + j) % len(hosts)
					u0, t0 := selfUsage(), time.Now()
					hosts[i].run(n)
					elapsed, u1 := time.Since(t0), selfUsage()
					perCell[i] = append(perCell[i], float64(elapsed.Nanoseconds())/float64(n))
					cpu[i] = append(cpu[i], float64(u1.cpu-u0.cpu)/float64(n))
					cs[i] = append(cs[i], float64(u1.switches-u0.switches)/float64(n))
				}
			}
			b.StopTimer()
			reportRoundTrip(b, hosts, perCell, cpu, cs)
		})
	}
}

// roundTripBlock is how many cells one host runs before the next takes
// its turn: enough to keep each host in its back-to-back regime, few
// enough that the turns interleave many times a second.
const roundTripBlock = 50

// roundTripHost runs n warm `x=1` cells back to back.
type roundTripHost struct {
	name string
	run  func(n int)
	cpu  bool // its host side runs in this process: its CPU is reported
}

// reportRoundTrip reports each host's median time per cell, kernpool's
// median ratio to each other host within a round, and the Go hosts' CPU
// and context switches.
func reportRoundTrip(b *testing.B, hosts []roundTripHost, perCell, cpu, cs [][]float64) {
	if len(perCell[0]) == 0 {
		return
	}
	b.ReportMetric(medianOf(perCell[0]), "ns/op")
	for i, h := range hosts {
		b.ReportMetric(medianOf(perCell[i]), h.name+"-ns/cell")
		if h.cpu {
			b.ReportMetric(medianOf(cpu[i]), h.name+"-cpu-ns/cell")
			b.ReportMetric(medianOf(cs[i]), h.name+"-cs/cell")
		}
		if i == 0 {
			continue
		}
		ratios := make([]float64, len(perCell[0]))
		for r := range ratios {
			ratios[r] = perCell[0][r] / perCell[i][r]
		}
		b.ReportMetric(medianOf(ratios), "kernpool/"+h.name)
	}
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// usage is this process's CPU time (user and system, ns) and context
// switches (voluntary and not) so far.
type usage struct{ cpu, switches int64 }

func selfUsage() usage {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{ru.Utime.Nano() + ru.Stime.Nano(), ru.Nvcsw + ru.Nivcsw}
}

// kernpoolHost is Kernel.Exec on a kernel as benchExec starts it.
func kernpoolHost(b *testing.B) roundTripHost {
	spec := baseSpec(b)
	spec.StdoutCap = 2 << 20 // as the pool's kernels keep spill_cap (5 MB by default)
	k := startKernel(b, spec, "")
	mustExec(b, k, "pass") // the first cell pays the start-up
	ctx, cell := context.Background(), Cell{Code: "x=1"}
	return roundTripHost{name: "kernpool", cpu: true, run: func(n int) {
		for i := 0; i < n; i++ {
			rep, err := k.Exec(ctx, cell)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Status != "ok" {
				b.Fatalf("cell status %q: %s", rep.Status, rep.Traceback)
			}
		}
	}}
}

// startSpinner starts a busy loop at the lowest priority (it yields to
// anything that wakes) and returns what stops it.
func startSpinner(b *testing.B) func() {
	cmd := exec.Command("nice", "-n", "19", "/bin/sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		b.Fatalf("spinner: %v", err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// rawRunner is a runner spawned as Start spawns it (staging files,
// environment, bootstrap line, process-group sandbox) but with its pipes
// left to the benchmark instead of Kernel's readers.
type rawRunner struct {
	cmd                     *exec.Cmd
	sb                      *ProcessGroup
	stdin, stdout, stderr   *os.File
	sentinel                []byte
	stagingDir, interpreter string
}

func spawnRawRunner(b *testing.B) *rawRunner {
	spec := baseSpec(b)
	spec.StdoutCap = 2 << 20 // as benchExec's kernel
	if err := validate(&spec); err != nil {
		b.Fatal(err)
	}
	staging := filepath.Join(spec.StateDir, "raw")
	if err := os.Mkdir(staging, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := writeStagingFiles(staging, nil); err != nil {
		b.Fatal(err)
	}
	r := &rawRunner{sb: NewProcessGroup(), sentinel: []byte(testSentinel), stagingDir: staging, interpreter: spec.Interpreter}
	cmd := exec.Command(spec.Interpreter, filepath.Join(staging, runnerFile))
	cmd.Env, _ = childEnv(spec.Env, nil, spec.ID, staging, outputCapsValue(&spec), false)
	cmd.Dir = staging
	var child [3]*os.File
	var err error
	if child[0], r.stdin, err = os.Pipe(); err != nil {
		b.Fatal(err)
	}
	if r.stdout, child[1], err = os.Pipe(); err != nil {
		b.Fatal(err)
	}
	if r.stderr, child[2], err = os.Pipe(); err != nil {
		b.Fatal(err)
	}
	growPipe(r.stdout)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	boot, err := bootstrapLine(testSentinel, "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.stdin.Write(boot); err != nil {
		b.Fatal(err)
	}
	if err := r.sb.Prepare(cmd, staging); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r.cmd = cmd
	closeAll(child[:])
	if err := r.sb.Started(cmd.Process.Pid); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = r.stdin.Close() // the runner ends at the end of its requests
		_ = r.cmd.Wait()
		_ = r.sb.Kill()
		_, _ = r.sb.Release()
		_ = r.stdout.Close()
		_ = r.stderr.Close()
	})
	return r
}

// goSyncHost is a minimal synchronous Go host.
func goSyncHost(b *testing.B) roundTripHost {
	r := spawnRawRunner(b)
	// Fd puts the files in blocking mode: plain read(2) that sleeps in the
	// kernel, woken by the runner's write, as a single-threaded host does.
	h := &syncHost{in: int(r.stdin.Fd()), out: int(r.stdout.Fd()), err: int(r.stderr.Fd()),
		marker: append([]byte("\n"), append(r.sentinel, ' ')...)}
	h.outBuf = make([]byte, 0, 64<<10)
	h.errBuf = make([]byte, 0, 64<<10)
	if err := h.cell(); err != nil { // the first cell pays the start-up
		b.Fatal(err)
	}
	return roundTripHost{name: "gosync", cpu: true, run: func(n int) {
		for i := 0; i < n; i++ {
			if err := h.cell(); err != nil {
				b.Fatal(err)
			}
		}
	}}
}

type syncHost struct {
	in, out, err   int
	marker         []byte
	outBuf, errBuf []byte
	n              int
}

// cell sends `x=1` and reads until both its frame (stdout) and its end
// mark (stderr) arrived.
func (h *syncHost) cell() error {
	h.n++
	n := strconv.Itoa(h.n)
	if _, err := unix.Write(h.in, []byte(`{"id":"`+n+`","code":"x=1"}`+"\n")); err != nil {
		return err
	}
	body, err := h.frame()
	if err != nil {
		return err
	}
	if !bytes.Contains(body, []byte(`"status":"ok"`)) {
		return fmt.Errorf("reply: %s", body)
	}
	return h.endMark([]byte("E " + n + "\n"))
}

// frame reads stdout until a reply frame is complete and returns its body
// (begin marks and raw output before it are skipped).
func (h *syncHost) frame() ([]byte, error) {
	for {
		buf := h.outBuf
		for i := bytes.Index(buf, h.marker); i >= 0; i = bytes.Index(buf, h.marker) {
			head := buf[i+len(h.marker):]
			nl := bytes.IndexByte(head, '\n')
			if nl < 0 {
				break
			}
			if head[0] < '0' || head[0] > '9' { // a B mark
				buf = head[nl+1:]
				continue
			}
			size, err := strconv.Atoi(string(head[:nl]))
			if err != nil {
				return nil, err
			}
			if len(head)-nl-1 < size {
				break
			}
			body := head[nl+1 : nl+1+size]
			h.outBuf = append(h.outBuf[:0], head[nl+1+size:]...)
			return body, nil
		}
		var err error
		if h.outBuf, err = readMore(h.out, h.outBuf); err != nil {
			return nil, err
		}
	}
}

// endMark reads stderr until marker+mark.
func (h *syncHost) endMark(mark []byte) error {
	want := append(append([]byte(nil), h.marker...), mark...)
	for {
		if i := bytes.Index(h.errBuf, want); i >= 0 {
			h.errBuf = append(h.errBuf[:0], h.errBuf[i+len(want):]...)
			return nil
		}
		var err error
		if h.errBuf, err = readMore(h.err, h.errBuf); err != nil {
			return err
		}
	}
}

func readMore(fd int, buf []byte) ([]byte, error) {
	if len(buf) == cap(buf) {
		buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
	}
	n, err := unix.Read(fd, buf[len(buf):cap(buf)])
	if n <= 0 {
		return buf, fmt.Errorf("read: %d, %v", n, err)
	}
	return buf[:len(buf)+n], nil
}

// pyHost is a single-threaded Python host on the runner's pipes (fds 3, 4
// and 5: its requests, stdout and stderr). It reads a cell count on
// stdin, runs that many `x=1` cells, one at a time with blocking reads,
// and answers "ok".
const pyHost = `import os, sys
os.set_blocking(3, True); os.set_blocking(4, True); os.set_blocking(5, True)
marker = b"\n" + sys.argv[1].encode() + b" "
out = b""
err = b""
n = 0

def frame():
    global out
    while True:
        i = out.find(marker)
        while i >= 0:
            head = i + len(marker)
            nl = out.find(b"\n", head)
            if nl < 0:
                break
            if not out[head:head + 1].isdigit():
                out = out[nl + 1:]
                i = out.find(marker)
                continue
            size = int(out[head:nl])
            if len(out) - nl - 1 < size:
                break
            body = out[nl + 1:nl + 1 + size]
            out = out[nl + 1 + size:]
            return body
        out += os.read(4, 65536)

def end_mark(want):
    global err
    while True:
        i = err.find(want)
        if i >= 0:
            err = err[i + len(want):]
            return
        err += os.read(5, 65536)

def cell():
    global n
    n += 1
    c = str(n).encode()
    os.write(3, b'{"id":"' + c + b'","code":"x=1"}\n')
    if b'"status":"ok"' not in frame():
        raise SystemExit("cell failed")
    end_mark(marker + b"E " + c + b"\n")

for line in sys.stdin:
    for _ in range(int(line)):
        cell()
    sys.stdout.write("ok\n")
    sys.stdout.flush()
`

// pyHostRunner is the single-threaded Python host; each block costs one
// more round trip on its control pipe, spread over the block's cells.
func pyHostRunner(b *testing.B) roundTripHost {
	r := spawnRawRunner(b)
	host := exec.Command(r.interpreter, "-c", pyHost, string(r.sentinel))
	host.ExtraFiles = []*os.File{r.stdin, r.stdout, r.stderr}
	host.Stderr = os.Stderr
	ctl, err := host.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outp, err := host.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := host.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = ctl.Close()
		_ = host.Wait()
	})
	answers := bufio.NewReader(outp)
	run := func(n int) {
		if _, err := fmt.Fprintf(ctl, "%d\n", n); err != nil {
			b.Fatal(err)
		}
		if line, err := answers.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ok" {
			b.Fatalf("python host: %q, %v", line, err)
		}
	}
	run(1) // the first cell pays the start-up
	return roundTripHost{name: "pyhost", run: run}
}
