//go:build integration && linux

package integration

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestDaemonSIGKILLMidCell: when the daemon is SIGKILLed while a cell runs,
// every process of every kernel (escaped grandchildren included) dies within
// 1 s (KERNPOOL_DEATH_DEADLINE overrides, e.g. under emulation), and a
// restarted daemon on the same state dir sweeps every leftover.
func TestDaemonSIGKILLMidCell(t *testing.T) {
	requireDaemon(t)
	o := capped()
	d := StartDaemon(t, o)
	for i := 0; i < 3; i++ {
		res := d.Run(t, fmt.Sprintf("idle-%d", i), setsidGrandchild)
		if res.Status != "success" {
			t.Fatalf("cell: %+v", res)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = d.API().Execute(ctx, ExecReq{Owner: "busy", Code: "import time\ntime.sleep(300)", Timeout: "300s"})
	}()
	defer wg.Wait()
	deadline := time.Now().Add(scaled(testenv.Patience))
	for !busy(d.Live(t)) {
		if time.Now().After(deadline) {
			t.Fatal("the busy cell never showed as busy in /v1/kernels")
		}
		time.Sleep(50 * time.Millisecond)
	}
	victims := d.scan(false).pids
	if len(victims) < 7 {
		t.Fatalf("want >= 7 kernel processes (4 kernels, 3 grandchildren) before the kill, found %d", len(victims))
	}
	d.mu.Lock()
	d.stopped = true // the kill below is the test, not a failure of Stop
	d.mu.Unlock()
	killAt := time.Now()
	d.Signal(syscall.SIGKILL)
	limit := envDuration("KERNPOOL_DEATH_DEADLINE", time.Second)
	var alive []int
	for {
		alive = alive[:0]
		for _, pid := range victims {
			if pidAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 || time.Since(killAt) > limit {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(alive) > 0 {
		l := d.scan(false)
		t.Errorf("%d kernel processes outlived the daemon's SIGKILL by %v:\n%s", len(alive), limit, l)
	} else {
		t.Logf("all %d kernel processes died %v after the daemon's SIGKILL", len(victims), time.Since(killAt).Round(time.Millisecond))
	}
	if !d.Wait(5 * time.Second) {
		t.Fatal("SIGKILLed daemon did not exit")
	}
	d.Restart(o)
	d.AssertClean(t)
	assertServes(t, d, "after-restart")
	shutdownAndCheck(t, d, "after-restart")
}

func busy(ks []KernelInfo) bool {
	for _, k := range ks {
		if k.Owner == "busy" && k.Busy {
			return true
		}
	}
	return false
}
