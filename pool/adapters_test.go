package pool_test

import "github.com/kernpool/kernpool/pool"

// The helpers of package pool's tests, exported in export_test.go, under
// the names those tests use.
var (
	newTestPool       = pool.NewTestPool
	run               = pool.Run
	wantStatus        = pool.WantStatus
	waitFor           = pool.WaitFor
	testTempDir       = pool.TestTempDir
	spareIDs          = pool.SpareIDs
	waitSpares        = pool.WaitSpares
	withWarm          = pool.WithWarm
	assertStagingGone = pool.AssertStagingGone
)
