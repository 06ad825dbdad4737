package api

import (
	"context"
	"fmt"
	"net/http"
)

// Settings is the body of GET /v1/settings: the configuration the running
// daemon uses now (after its last reload), so `kernpool doctor` reports
// the daemon's settings rather than its own flag defaults.
type Settings struct {
	// Socket is the API socket the daemon listens on.
	Socket string `json:"socket"`
	// StateDir is the daemon's state directory.
	StateDir string `json:"state_dir"`
	// Interpreter is the default interpreter kernels run (resolved at start).
	Interpreter string `json:"interpreter"`
	// Isolation is the configured isolation mode (sandbox or process).
	Isolation string `json:"isolation"`
	// IdleTimeout, CellTimeout, MaxCellTimeout, ToolCallTimeout and
	// DrainGrace are the daemon's timeouts.
	IdleTimeout     Duration `json:"idle_timeout"`
	CellTimeout     Duration `json:"cell_timeout"`
	MaxCellTimeout  Duration `json:"max_cell_timeout"`
	ToolCallTimeout Duration `json:"tool_call_timeout"`
	DrainGrace      Duration `json:"drain_grace"`
	// MaxKernels caps the live kernels; MaxToolCalls the tool calls a cell makes.
	MaxKernels   int `json:"max_kernels"`
	MaxToolCalls int `json:"max_tool_calls"`
	// CgroupParent and CgroupEnabled are the cgroup settings.
	CgroupParent  string `json:"cgroup_parent"`
	CgroupEnabled bool   `json:"cgroup_enabled"`
	// Users are the kernel uid settings.
	Users UserSettings `json:"users"`
	// Profiles are the modes kernels run in, by name.
	Profiles map[string]ProfileSettings `json:"profiles"`
}

// UserSettings are the daemon's kernel uid settings.
type UserSettings struct {
	Enabled  bool `json:"enabled"`
	UIDFirst int  `json:"uid_first"`
	UIDLast  int  `json:"uid_last"`
	PerOwner bool `json:"per_owner"`
}

// ProfileSettings are one mode's limits and warm-up (sizes in bytes; 0 is
// unlimited, except MemorySwapMax where 0 is no swap).
type ProfileSettings struct {
	MemoryMax     int64    `json:"memory_max"`
	MemorySwapMax int64    `json:"memory_swap_max"`
	PidsMax       int64    `json:"pids_max"`
	CPUMax        float64  `json:"cpu_max"`
	CPUWeight     uint64   `json:"cpu_weight"`
	Network       bool     `json:"network"`
	TmpSize       int64    `json:"tmp_size"`
	MemoryMerge   bool     `json:"memory_merge"`
	Spares        int      `json:"spares"`
	Preload       []string `json:"preload"`
	FilesMaxBytes int64    `json:"files_max_bytes"`
}

// handleSettings answers GET /v1/settings from ServerConfig.Settings; an
// embedder that sets none answers 404.
func (s *Server) handleSettings(w http.ResponseWriter, r *http.Request) {
	if forbidNonAdmin(w, r) { // it names host paths (socket, state dir, cgroup parent)
		return
	}
	if s.cfg.Settings == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "this server reports no settings")
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Settings())
}

// Settings returns the running daemon's configuration (GET /v1/settings).
func (c *Client) Settings(ctx context.Context) (*Settings, error) {
	var st Settings
	if err := c.do(ctx, http.MethodGet, "/v1/settings", nil, &st); err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return &st, nil
}
