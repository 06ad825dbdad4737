package pool_test

import (
	"strings"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// A cell that forges reply frames with the real sentinel: a 60 MB claim is
// refused from its header, and a frame under the limit with every member
// at its cap that then repeats one is refused at the repeat; either way
// the kernel is killed, the result says why in plain words, the daemon's
// memory stays bounded and other owners are served throughout.
func TestHostileForgedFrames(t *testing.T) {
	testenv.RequirePython(t)
	cases := []struct {
		name, code, detail string
	}{
		{"60 MB frame", findSentinel + `
os.write(1, b"\n" + sent + b" 60000000\n")
chunk = b"x" * (1 << 20)
for _ in range(60):
    os.write(1, chunk)
`, "a reply frame of 60000000 bytes exceeds the 37971712-byte limit"},
		{"members at their caps, then repeated", findSentinel + `
big = b'"' + b"x" * 4_000_000 + b'"'
body = b'{"id":"1","status":"ok","stdout":' + big + b',"stderr":' + big[:1_000_000] + b'","stdout":' + big + b'}'
os.write(1, b"\n" + sent + b" " + str(len(body)).encode() + b"\n" + body)
import time; time.sleep(60)
`, `frame repeats member "stdout"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, func(cfg *pool.Config) { cfg.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) })
			var res *pool.Result
			underAttack(t, p, func() { res = run(t, p, pool.Request{Owner: "attacker", Code: c.code}) })
			if res.Status != pool.StatusError || res.ExitCode != -1 || !strings.Contains(res.Error, "broke the wire protocol") ||
				!strings.Contains(res.Error, c.detail) || !strings.Contains(res.Error, "it was killed") {
				t.Fatalf("result %+v, want a protocol error saying %q", res, c.detail)
			}
			t.Log(assertResultBounded(t, res, maxOutput, maxErrorText))
			if len(p.List()) != 1 { // the bystander's only
				t.Fatalf("kernels %+v: the attacker's kernel survived", p.List())
			}
		})
	}
}

// A 4 MB exception message: capped in the runner (64 KiB) and again in
// the daemon like stderr, in both error and output; the kernel keeps its
// state. The same for a 4 MB SystemExit message, which ends the kernel.
func TestHostileHugeException(t *testing.T) {
	p := newTestPool(t, func(cfg *pool.Config) { cfg.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) })
	var res *pool.Result
	underAttack(t, p, func() {
		res = run(t, p, pool.Request{Owner: "a", Code: "kept = 1\nraise ValueError('head' + 'x' * 4_000_000 + 'tail')"})
	})
	wantStatus(t, res, pool.StatusError)
	if !strings.HasPrefix(res.Error, "Traceback") || !strings.Contains(res.Error, "OUTPUT TRUNCATED") || !strings.HasSuffix(strings.TrimSpace(res.Error), "tail") {
		t.Fatalf("error is not a capped traceback (head, notice, tail): %.200q ... %.200q", res.Error, res.Error[max(len(res.Error)-200, 0):])
	}
	t.Log(assertResultBounded(t, res, maxOutput, maxErrorText))
	if again := run(t, p, pool.Request{Owner: "a", Code: "kept"}); again.Output != "1\n" || !again.Kernel.Reused {
		t.Fatalf("the kernel lost its state after the exception: %+v", again)
	}
	exit := run(t, p, pool.Request{Owner: "a", Code: "raise SystemExit('y' * 4_000_000)"})
	if !exit.Kernel.Ended {
		t.Fatalf("SystemExit did not end the kernel: %+v", exit)
	}
	t.Log(assertResultBounded(t, exit, maxOutput, maxErrorText))
}
