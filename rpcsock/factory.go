package rpcsock

import (
	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool"
)

// The pool's seams this package fills, with the pool's own types.
var (
	_ pool.ToolServerFactory = Factory{}
	_ pool.ToolServer        = (*Server)(nil)
)

// Factory opens each kernel's tool listener with Listen's defaults: the
// pool's ToolServerFactory. Its zero value logs nothing.
type Factory struct {
	// Logger receives every listener's logs (nil = no logging).
	Logger hclog.Logger
}

// Listen opens the listener of one kernel in its staging dir, owned by
// uid (-1: the daemon's own), serving tools.
func (f Factory) Listen(staging string, uid int, tools []string) (pool.ToolServer, error) {
	s, err := Listen(Config{Dir: staging, UID: uid, Tools: tools, Logger: f.Logger})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Stub is the generated kernpool_tools module for tools.
func (Factory) Stub(tools []string) []byte { return Stub(tools) }
