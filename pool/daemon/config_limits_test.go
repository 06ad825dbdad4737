package daemon_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool/daemon"
)

// TestValidateLimits: each setting Validate bounds, at its limit
// (accepted) and one past it (refused naming the setting). The figures
// are docs/config.md's rules: positive, not negative, at least, at most.
func TestValidateLimits(t *testing.T) {
	prof := func(f func(*daemon.Profile)) func(*daemon.Config) {
		return func(c *daemon.Config) {
			p := c.Profiles[daemon.DefaultProfile]
			f(&p)
			c.Profiles[daemon.DefaultProfile] = p
		}
	}
	tests := []struct {
		name string
		set  func(*daemon.Config)
		err  string // "" when accepted
	}{
		{"idle_timeout 1ns", func(c *daemon.Config) { c.IdleTimeout = 1 }, ""},
		{"idle_timeout 0", func(c *daemon.Config) { c.IdleTimeout = 0 }, "idle_timeout must be positive"},
		{"cell_timeout 1ns", func(c *daemon.Config) { c.CellTimeout = 1 }, ""},
		{"cell_timeout 0", func(c *daemon.Config) { c.CellTimeout = 0 }, "cell_timeout must be positive"},
		{"max_cell_timeout = cell_timeout", func(c *daemon.Config) { c.CellTimeout, c.MaxCellTimeout = time.Minute, time.Minute }, ""},
		{"max_cell_timeout below cell_timeout", func(c *daemon.Config) { c.CellTimeout, c.MaxCellTimeout = time.Minute, time.Minute-1 }, "max_cell_timeout must be at least cell_timeout"},
		{"max_kernels 1", func(c *daemon.Config) { c.MaxKernels = 1 }, ""},
		{"max_kernels 0", func(c *daemon.Config) { c.MaxKernels = 0 }, "max_kernels must be at least 1"},
		{"max_tool_calls 0", func(c *daemon.Config) { c.MaxToolCalls = 0 }, ""},
		{"max_tool_calls -1", func(c *daemon.Config) { c.MaxToolCalls = -1 }, "max_tool_calls must not be negative"},
		{"tool_call_timeout 1ns", func(c *daemon.Config) { c.ToolCallTimeout = 1 }, ""},
		{"tool_call_timeout 0", func(c *daemon.Config) { c.ToolCallTimeout = 0 }, "tool_call_timeout must be positive"},
		{"drain_grace 0", func(c *daemon.Config) { c.DrainGrace = 0 }, ""},
		{"drain_grace -1ns", func(c *daemon.Config) { c.DrainGrace = -1 }, "drain_grace must not be negative"},
		{"max_kernels_per_owner 0", func(c *daemon.Config) { c.MaxKernelsPerOwner = 0 }, ""},
		{"max_kernels_per_owner -1", func(c *daemon.Config) { c.MaxKernelsPerOwner = -1 }, "max_kernels_per_owner must not be negative"},
		{"max_cells_per_minute_per_owner 0", func(c *daemon.Config) { c.MaxCellsPerMinutePerOwner = 0 }, ""},
		{"max_cells_per_minute_per_owner -1", func(c *daemon.Config) { c.MaxCellsPerMinutePerOwner = -1 }, "max_cells_per_minute_per_owner must not be negative"},
		{"audit_max_size and audit_keep 0", func(c *daemon.Config) { c.Audit.MaxSize, c.Audit.Keep = 0, 0 }, ""},
		{"audit_max_size -1", func(c *daemon.Config) { c.Audit.MaxSize = -1 }, "audit_max_size and audit_keep must not be negative"},
		{"audit_keep -1", func(c *daemon.Config) { c.Audit.Keep = -1 }, "audit_max_size and audit_keep must not be negative"},
		{"output caps 1, spill_quota 0", func(c *daemon.Config) {
			c.Output.InlineCap, c.Output.StderrCap, c.Output.SpillCap, c.Output.SpillQuota = 1, 1, 1, 0
		}, ""},
		{"inline_cap 0", func(c *daemon.Config) { c.Output.InlineCap = 0 }, "output caps must be positive"},
		{"stderr_cap 0", func(c *daemon.Config) { c.Output.StderrCap = 0 }, "output caps must be positive"},
		{"spill_cap 0", func(c *daemon.Config) { c.Output.SpillCap = 0 }, "output caps must be positive"},
		{"spill_quota -1", func(c *daemon.Config) { c.Output.SpillQuota = -1 }, "output caps must be positive"},
		// One result's text: inline_cap + 3 x stderr_cap <= 1,000,000.
		{"result budget met", func(c *daemon.Config) { c.Output.InlineCap, c.Output.StderrCap = 970_000, 10_000 }, ""},
		{"result budget + 1", func(c *daemon.Config) { c.Output.InlineCap, c.Output.StderrCap = 970_001, 10_000 }, "output.inline_cap + 3 x output.stderr_cap must stay within 1000000 bytes"},
		{"result budget in stderr", func(c *daemon.Config) { c.Output.InlineCap, c.Output.StderrCap = 1, 333_334 }, "must stay within 1000000 bytes"},
		{"spill_quota = spill_cap", func(c *daemon.Config) { c.Output.SpillCap, c.Output.SpillQuota = 2_000_000, 2_000_000 }, ""},
		{"spill_quota below spill_cap", func(c *daemon.Config) { c.Output.SpillCap, c.Output.SpillQuota = 2_000_000, 1_999_999 }, "output.spill_quota must hold at least one spill"},
		{"uid_range 1-1", func(c *daemon.Config) { c.Users.UIDFirst, c.Users.UIDLast = 1, 1 }, ""},
		{"uid_range 0-5", func(c *daemon.Config) { c.Users.UIDFirst, c.Users.UIDLast = 0, 5 }, "users.uid_range must be FIRST-LAST"},
		{"uid_range 6-5", func(c *daemon.Config) { c.Users.UIDFirst, c.Users.UIDLast = 6, 5 }, "users.uid_range must be FIRST-LAST"},
		{"checkpoint bounds 1", func(c *daemon.Config) {
			c.Checkpoints.MaxBytesPerOwner, c.Checkpoints.Retention, c.Checkpoints.Timeout, c.Checkpoints.Idle = 1, 1, 1, 0
		}, ""},
		{"checkpoint_max_bytes_per_owner 0", func(c *daemon.Config) { c.Checkpoints.MaxBytesPerOwner = 0 }, "checkpoint_max_bytes_per_owner, checkpoint_retention and checkpoint_timeout must be positive"},
		{"checkpoint_retention 0", func(c *daemon.Config) { c.Checkpoints.Retention = 0 }, "checkpoint_retention and checkpoint_timeout must be positive"},
		{"checkpoint_timeout 0", func(c *daemon.Config) { c.Checkpoints.Timeout = 0 }, "checkpoint_timeout must be positive"},
		{"checkpoint_idle -1ns", func(c *daemon.Config) { c.Checkpoints.Idle = -1 }, "checkpoint_idle must not be negative"},
		{"session bounds 1", func(c *daemon.Config) {
			s := &c.Sessions
			s.MaxSessions, s.MaxSessionsPerOwner, s.IdleTimeout, s.MaxEnvNames, s.MaxEnvBytes = 1, 1, 1, 1, 1
		}, ""},
		{"max_sessions 0", func(c *daemon.Config) { c.Sessions.MaxSessions = 0 }, "max_sessions, max_sessions_per_owner, session_idle_timeout, max_env_names and max_env_bytes must be positive"},
		{"max_sessions_per_owner 0", func(c *daemon.Config) { c.Sessions.MaxSessionsPerOwner = 0 }, "must be positive"},
		{"session_idle_timeout 0", func(c *daemon.Config) { c.Sessions.IdleTimeout = 0 }, "must be positive"},
		{"max_env_names 0", func(c *daemon.Config) { c.Sessions.MaxEnvNames = 0 }, "must be positive"},
		{"max_env_bytes 0", func(c *daemon.Config) { c.Sessions.MaxEnvBytes = 0 }, "must be positive"},
		{"fleet_heartbeat 1ns", func(c *daemon.Config) { c.Fleet.Heartbeat = 1 }, ""},
		{"fleet_heartbeat 0", func(c *daemon.Config) { c.Fleet.Heartbeat = 0 }, "fleet_heartbeat must be positive"},
		// The listener's bounds are checked with or without listen.
		{"listen bounds at their limits", func(c *daemon.Config) {
			n := &c.Network
			n.MaxConns, n.MaxHeaderBytes, n.HeaderTimeout, n.IdleTimeout = 1, 1024, 1, 1
		}, ""},
		{"listen_max_conns 0", func(c *daemon.Config) { c.Network.MaxConns = 0 }, "listen_max_conns must be at least 1, listen_max_header_bytes at least 1KiB"},
		{"listen_max_header_bytes 1023", func(c *daemon.Config) { c.Network.MaxHeaderBytes = 1023 }, "listen_max_header_bytes at least 1KiB"},
		{"listen_header_timeout 0", func(c *daemon.Config) { c.Network.HeaderTimeout = 0 }, "listen_header_timeout and listen_idle_timeout positive"},
		{"listen_idle_timeout 0", func(c *daemon.Config) { c.Network.IdleTimeout = 0 }, "listen_header_timeout and listen_idle_timeout positive"},
		{"profile limits 0, cpu_weight 10000", prof(func(p *daemon.Profile) {
			p.MemoryMax, p.PidsMax, p.CPUMax, p.CPUWeight, p.Spares = 0, 0, 0, 10000, 0
		}), ""},
		{"memory_max -1", prof(func(p *daemon.Profile) { p.MemoryMax = -1 }), `profile "default": limits must not be negative and cpu_weight at most 10000`},
		{"pids_max -1", prof(func(p *daemon.Profile) { p.PidsMax = -1 }), "limits must not be negative"},
		{"cpu_max -0.01", prof(func(p *daemon.Profile) { p.CPUMax = -0.01 }), "limits must not be negative"},
		{"cpu_weight 10001", prof(func(p *daemon.Profile) { p.CPUWeight = 10001 }), "cpu_weight at most 10000"},
		{"interrupt_grace 1ns", prof(func(p *daemon.Profile) { p.InterruptGrace = 1 }), ""},
		{"interrupt_grace 0", prof(func(p *daemon.Profile) { p.InterruptGrace = 0 }), "interrupt_grace positive"},
		{"files_max_bytes 1", prof(func(p *daemon.Profile) { p.FilesMaxBytes = 1 }), ""},
		{"files_max_bytes 0", prof(func(p *daemon.Profile) { p.FilesMaxBytes = 0 }), `profile "default": files_max_bytes must be positive`},
		{"spares -1", prof(func(p *daemon.Profile) { p.Spares = -1 }), `profile "default": spares must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := daemon.DefaultConfig()
			c.Socket, c.StateDir = "/run/kp/kp.sock", "/run/kp/state"
			tt.set(c)
			err := c.Validate()
			if tt.err == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, daemon.ErrConfig) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Validate = %v, want ErrConfig saying %q", err, tt.err)
			}
		})
	}
}
