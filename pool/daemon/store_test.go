package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/s3test"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/ckpts3"
	"github.com/kernpool/kernpool/pool/daemon"
)

// storeConfig is testConfig with a persisting default profile and the
// S3 store srv serves.
func storeConfig(t *testing.T, srv *s3test.Server) *daemon.Config {
	t.Helper()
	cfg := testConfig(t)
	prof := cfg.Profiles[daemon.DefaultProfile]
	prof.Persist, prof.Spares = true, 0
	cfg.Profiles[daemon.DefaultProfile] = prof
	cfg.CheckpointStore = daemon.StoreConfig{URL: "s3://fleet/ckpt", Endpoint: srv.URL, AllowHTTP: true}
	return cfg
}

func setEnv(t *testing.T, env map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestDaemonsShareStore: daemon A (its own state dir) saves an owner's
// variables into the S3 store when it shuts down; daemon B, another state
// dir with the same store, restores them into the owner's next kernel
// and says what was restored and what was lost.
func TestDaemonsShareStore(t *testing.T) {
	testenv.RequirePython(t) // before the server: its temp dir outlives a skip on Windows
	srv := s3test.Start(t, "fleet")
	setEnv(t, srv.Env())
	ctx := context.Background()
	a, err := daemon.New(ctx, storeConfig(t, srv), daemon.WithLogger(testenv.Logger(t, hclog.Debug)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Pool().Execute(ctx, pool.Request{Owner: "alice", Code: "x = 6 * 7\nimport threading\nlk = threading.Lock()"})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("A: %+v %v", res, err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := daemon.New(ctx, storeConfig(t, srv), daemon.WithLogger(testenv.Logger(t, hclog.Debug)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Shutdown(ctx) }()
	if infos := b.Pool().Checkpoints(); len(infos) != 1 || infos[0].Owner != "alice" || infos[0].Generation != 1 {
		t.Fatalf("B sees checkpoints %+v", infos)
	}
	res, err = b.Pool().Execute(ctx, pool.Request{Owner: "alice", Code: "x"})
	if err != nil || res.Output != "42\n" || !res.Kernel.Restored || !strings.Contains(strings.Join(res.Restored, ","), "x") ||
		len(res.Lost) != 1 || res.Lost[0] != "lk" || !strings.Contains(res.Warning, "(pool closed)") {
		t.Fatalf("B's first cell for alice: %+v %v", res, err)
	}
}

// TestDaemonStoreFailsClosed: a configured store that is misconfigured
// or cannot be reached stops the start with an error naming
// checkpoint_store; the daemon never runs on local files instead.
func TestDaemonStoreFailsClosed(t *testing.T) {
	testenv.RequirePython(t) // before the server: its temp dir outlives a skip on Windows
	srv := s3test.Start(t, "fleet")
	for _, tc := range []struct {
		name string
		env  map[string]string
		mod  func(*daemon.Config)
		want error
	}{
		{"no credentials", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "HOME": t.TempDir(), "AWS_SHARED_CREDENTIALS_FILE": ""}, nil, ckpts3.ErrNoCredentials},
		{"missing bucket", srv.Env(), func(c *daemon.Config) { c.CheckpointStore.URL = "s3://nosuch/x" }, ckpts3.ErrNoBucket},
		{"plain http", srv.Env(), func(c *daemon.Config) { c.CheckpointStore.AllowHTTP = false }, ckpts3.ErrPlainHTTP},
		{"bad url", srv.Env(), func(c *daemon.Config) { c.CheckpointStore.URL = "s3://" }, ckpts3.ErrBadURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			cfg := storeConfig(t, srv)
			if tc.mod != nil {
				tc.mod(cfg)
			}
			d, err := daemon.New(context.Background(), cfg, daemon.WithLogger(hclog.NewNullLogger()))
			if err == nil {
				_ = d.Shutdown(context.Background())
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "checkpoint_store") {
				t.Fatalf("New = %v, want %v naming checkpoint_store", err, tc.want)
			}
		})
	}
	// A URL of another scheme is refused by the config check.
	cfg := storeConfig(t, srv)
	cfg.CheckpointStore.URL = "gs://bucket"
	if _, err := daemon.New(context.Background(), cfg, daemon.WithLogger(hclog.NewNullLogger())); !errors.Is(err, daemon.ErrConfig) || !strings.Contains(err.Error(), "s3://bucket[/prefix]") {
		t.Fatalf("gs:// = %v", err)
	}
}

// TestStoreOwnerCapFitsOnePut: with an S3 store, an owner's checkpoints
// plus the 2 MiB header allowance must fit the 5 GiB one PUT stores:
// checkpoint_max_bytes_per_owner of 5 GiB - 2 MiB starts, one byte more
// is refused naming both figures.
func TestStoreOwnerCapFitsOnePut(t *testing.T) {
	testenv.RequirePython(t)
	srv := s3test.Start(t, "fleet")
	setEnv(t, srv.Env())
	for _, tc := range []struct {
		cap int64
		err string
	}{
		{5<<30 - 2<<20, ""},
		{5<<30 - 2<<20 + 1, "checkpoint_max_bytes_per_owner 5366611969 is over the 5368709120 bytes one S3 PUT stores"},
	} {
		cfg := storeConfig(t, srv)
		cfg.Checkpoints.MaxBytesPerOwner = tc.cap
		d, err := daemon.New(context.Background(), cfg, daemon.WithLogger(hclog.NewNullLogger()))
		if err == nil {
			_ = d.Shutdown(context.Background())
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("cap %d: %v", tc.cap, err)
		case tc.err != "" && (!errors.Is(err, daemon.ErrConfig) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("cap %d: %v, want ErrConfig saying %q", tc.cap, err, tc.err)
		}
	}
}

// TestStoreHoldsACheckpointNearTheCap: with an S3 store, a checkpoint
// close to checkpoint_max_bytes_per_owner (2 MB of random bytes under a
// 3 MiB cap) is saved by one daemon and restored by another: the store
// takes objects up to the cap plus the header allowance.
func TestStoreHoldsACheckpointNearTheCap(t *testing.T) {
	testenv.RequirePython(t)
	srv := s3test.Start(t, "fleet")
	setEnv(t, srv.Env())
	ctx := context.Background()
	cfg := storeConfig(t, srv)
	cfg.Checkpoints.MaxBytesPerOwner = 3 << 20
	a, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Debug)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Pool().Execute(ctx, pool.Request{Owner: "alice", Code: "import os\nx = os.urandom(2000000)"})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("A: %+v %v", res, err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cfg = storeConfig(t, srv)
	cfg.Checkpoints.MaxBytesPerOwner = 3 << 20
	b, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Debug)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Shutdown(ctx) }()
	res, err = b.Pool().Execute(ctx, pool.Request{Owner: "alice", Code: "len(x)"})
	if err != nil || res.Output != "2000000\n" || !res.Kernel.Restored {
		t.Fatalf("B's first cell for alice: %+v %v", res, err)
	}
}
