package pool

// The Linux-only helpers package pool_test uses (see export_test.go).
var (
	NewPersistPool = newPersistPool
	WaitSaved      = waitSaved
	MustSession    = mustSession
)
