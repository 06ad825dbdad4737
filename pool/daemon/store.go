package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/ckpts3"
)

// storeOpenTimeout bounds reaching a shared checkpoint store at start.
const storeOpenTimeout = 30 * time.Second

// openStore opens the configured checkpoint store: nil for the local one
// (the pool makes it), else the S3 store, reached now. A store that
// cannot be reached stops the start: the daemon never falls back to
// local files, which other nodes could not restore from.
func openStore(ctx context.Context, c *Config, log hclog.Logger) (pool.CheckpointStore, error) {
	if c.CheckpointStore.URL == "" {
		return nil, nil
	}
	if limit := c.Checkpoints.MaxBytesPerOwner + 2<<20; limit > ckpts3.MaxObjectBytes {
		return nil, fmt.Errorf("checkpoint_store: checkpoint_max_bytes_per_owner %d is over the %d bytes one S3 PUT stores: %w", c.Checkpoints.MaxBytesPerOwner, int64(ckpts3.MaxObjectBytes), ErrConfig)
	}
	ctx, cancel := context.WithTimeout(ctx, min(storeOpenTimeout, c.Checkpoints.Timeout))
	defer cancel()
	st, err := ckpts3.Open(ctx, ckpts3.Config{
		URL: c.CheckpointStore.URL, Endpoint: c.CheckpointStore.Endpoint, AllowHTTP: c.CheckpointStore.AllowHTTP,
		// The largest object the pool writes: a whole owner cap plus a
		// header; anything larger is not one of ours.
		MaxObjectBytes: c.Checkpoints.MaxBytesPerOwner + 2<<20,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint_store: %w", err)
	}
	log.Info("checkpoint store", "store", st.Describe())
	return st, nil
}
