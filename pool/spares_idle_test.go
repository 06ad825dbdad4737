package pool

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A refiller with nothing to start and no back-off to wait for sleeps
// until it is woken: it does not re-arm its timer at 0 and spin. In a
// bubble (testing/synctest) the clock moves only while every goroutine
// sleeps, so the test's two hours pass at once when the refiller sleeps
// and never when it spins: a spin hangs the bubble, which the watchdog
// outside it turns into a failure after testenv.Patience.
func TestIdleRefillerSleeps(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(testenv.Patience):
			panic("TestIdleRefillerSleeps: the refiller with nothing to start never slept (a busy loop)")
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		// Mode a is at its count (0), and the pool has room.
		p := &Pool{cfg: Config{MaxKernels: 8}, stop: make(chan struct{}), sp: newSpareState(map[string]Warm{"a": {}})}
		go p.refiller()
		time.Sleep(2 * time.Hour) // past the refiller's first timer (1 h) too
		close(p.stop)
		<-p.sp.done
	})
}
