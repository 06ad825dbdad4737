package isolate

import (
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// BenchmarkUIDLease times one lease and release of a kernel uid with the
// host lock dir and the leftover scrub of the real world-writable dirs
// (/tmp, /var/tmp, /dev/shm, /run/lock, /dev/mqueue) and SysV IPC, against
// the same lease without the scrub (the floor), in one run:
//
//	go test -run '^$' -bench UIDLease -benchtime 200x ./isolate/
func BenchmarkUIDLease(b *testing.B) {
	testenv.RequireRoot(b)
	for _, bc := range []struct {
		name  string
		scrub func(int)
	}{
		{"floor-no-scrub", nil},
		{"with-scrub", func(uid int) { _, _ = scrubUID(DefaultScrubDirs(), uid) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := newUIDPool(61980, 61989, false, b.TempDir(), nil)
			p.scrub = bc.scrub
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				uid, err := p.acquire("bench")
				if err != nil {
					b.Fatal(err)
				}
				p.release(uid)
			}
		})
	}
}
