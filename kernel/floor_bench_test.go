package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// echoRunner is the floor of the round trip: a minimal Python loop that
// answers each request with the stderr end mark and an empty "ok" frame,
// over the same pipes and driven by the same Go code (Kernel.Exec) as the
// runner. BenchmarkExecWarm should stay within 1.25x of BenchmarkExecFloor.
// benchFloor prefixes it with MARKS and RUN, which pick the variant.
const echoRunner = `import os
if RUN:
    import _json
    ns = {}
fd = os.dup(0)
buf = b""
while b"\n" not in buf:
    buf += os.read(fd, 4096)
line, _, buf = buf.partition(b"\n")
s = line.split(b" ")[1]
n = 0
while True:
    while b"\n" not in buf:
        chunk = os.read(fd, 65536)
        if not chunk:
            os._exit(0)
        buf += chunk
    line, _, buf = buf.partition(b"\n")
    n += 1
    rid = line[7:line.index(b'"', 7)]
    c = str(n).encode()
    if RUN:
        code = _json.scanstring(line.decode(), line.index(b'"code":"') + 8, True)[0]
        co = compile(code, "<cell>", "exec")
    if MARKS:
        os.write(1, b"\n" + s + b" B " + c + b"\n")
        os.write(2, b"\n" + s + b" B " + c + b"\n")
    if RUN:
        exec(co, ns)
    os.write(2, b"\n" + s + b" E " + c + b"\n")
    body = (b'{"id":"' + rid + b'","status":"ok","stdout":"","stderr":"","traceback":"",'
            b'"exit_code":0,"execution_count":' + c + b"}")
    os.write(1, b"\n" + s + b" " + str(len(body)).encode() + b"\n" + body)
`

// BenchmarkExecFloor: BenchmarkExecWarm's cell against the echo loop.
func BenchmarkExecFloor(b *testing.B) { benchFloor(b, false, false) }

// BenchmarkExecFloorMarks: the echo loop that also writes the begin marks
// the runner writes before each cell (the exact boundary between output
// written between cells and a cell's own): what the marks alone
// cost over the floor.
func BenchmarkExecFloorMarks(b *testing.B) { benchFloor(b, true, false) }

// BenchmarkExecFloorRun: BenchmarkExecFloorMarks that also compiles the
// cell's code, then (after the marks, as the runner does) runs it in one
// namespace, with no capture, display or caps: what executing the cell
// costs over the marks, and what is left is the runner's own.
func BenchmarkExecFloorRun(b *testing.B) { benchFloor(b, true, true) }

func benchFloor(b *testing.B, marks, run bool) {
	runner := fmt.Sprintf("MARKS = %s\nRUN = %s\n", pyBool(marks), pyBool(run)) + echoRunner
	testenv.RequirePython(b)
	spec := baseSpec(b)
	spec.Setup = func(staging string) ([]string, error) {
		return nil, os.WriteFile(filepath.Join(staging, runnerFile), []byte(runner), 0o600)
	}
	k := startKernel(b, spec, "")
	ctx := context.Background()
	cell := Cell{Code: "x=1"}
	mustExec(b, k, "x=1") // the start-up, untimed (see benchExec)
	report := testenv.MeasureCPU(b, k.Pid())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := k.Exec(ctx, cell); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report()
}

// BenchmarkExec1MiBStreamed: BenchmarkExec1MiB's cell with a live sink
// (the output goes through the fd-level path as it is written, the kept
// part to the sink).
func BenchmarkExec1MiBStreamed(b *testing.B) {
	testenv.RequirePython(b)
	b.SetBytes(1 << 20)
	k := startKernel(b, baseSpec(b), "")
	mustExec(b, k, "s = '\u00e9' * (1 << 19)")
	ctx := context.Background()
	var got int
	cell := Cell{Code: "print(s, end='')", Stream: func(ev Event) {
		if ev.Kind == EventStdout {
			got += len(ev.Data)
		}
	}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got = 0
		rep, err := k.Exec(ctx, cell)
		if err != nil {
			b.Fatal(err)
		}
		// The stream carries what the cell's output keeps (DefaultRawStdoutCap),
		// the total counts the whole MiB, as in a captured cell.
		if got != DefaultRawStdoutCap || rep.StdoutBytesTotal != 1<<20 {
			b.Fatalf("streamed %d bytes of %d, want %d of %d", got, rep.StdoutBytesTotal, DefaultRawStdoutCap, 1<<20)
		}
	}
}

func pyBool(v bool) string {
	if v {
		return "True"
	}
	return "False"
}
