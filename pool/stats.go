package pool

// PoolStats are the pool's lifetime counters plus its current size.
type PoolStats struct {
	// KernelsLive is the number of live (or starting) kernels now.
	KernelsLive int `json:"kernels_live"`
	// KernelsBusy is the number of kernels running or queueing a cell now.
	KernelsBusy int `json:"kernels_busy"`
	// KernelsSaving is the number of evicted or reaped kernels whose
	// checkpoint is being saved now (not in KernelsLive).
	KernelsSaving int `json:"kernels_saving"`
	// KernelsStarted counts successful spawns.
	KernelsStarted uint64 `json:"kernels_started"`
	// SpawnFailures counts spawns that failed.
	SpawnFailures uint64 `json:"spawn_failures"`
	// Cells counts cells that reached a kernel.
	Cells uint64 `json:"cells"`
	// Evicted counts kernels evicted by the MaxKernels cap.
	Evicted uint64 `json:"evicted"`
	// Reaped counts kernels killed for idling past IdleTimeout.
	Reaped uint64 `json:"reaped"`
	// Resets counts kernels discarded by Request.Reset.
	Resets uint64 `json:"resets"`
	// Timeouts counts cells that hit their timeout.
	Timeouts uint64 `json:"timeouts"`
	// Interrupted counts cells canceled by their caller or by a kill.
	Interrupted uint64 `json:"interrupted"`
	// Died counts kernels that died while running a cell or a variables
	// listing (OOM included).
	Died uint64 `json:"died"`
	// OOMKilled counts kernels killed by their memory limit (during a cell
	// or a listing).
	OOMKilled uint64 `json:"oom_killed"`
	// Ended counts kernels ended by sys.exit.
	Ended uint64 `json:"ended"`
	// Killed counts kernels killed by Kill, ShutdownOwner or Close.
	Killed uint64 `json:"killed"`
	// CapacityRefusals counts requests refused with ErrCapacity.
	CapacityRefusals uint64 `json:"capacity_refusals"`
	// Spares is the number of warm spares ready now (not in KernelsLive).
	Spares int `json:"spares"`
	// SparesStarted counts spares that became ready; SparesClaimed those
	// a new key took; SparesEvicted those the MaxKernels cap stopped.
	SparesStarted uint64 `json:"spares_started"`
	SparesClaimed uint64 `json:"spares_claimed"`
	SparesEvicted uint64 `json:"spares_evicted"`
	// CheckpointsSaved counts kernels of persist modes whose state was
	// saved at their stop (an empty namespace counts: nothing was lost);
	// CheckpointsFailed those whose save was refused, failed or found
	// the kernel dead.
	CheckpointsSaved  uint64 `json:"checkpoints_saved"`
	CheckpointsFailed uint64 `json:"checkpoints_failed"`
}
