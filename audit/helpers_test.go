package audit

import (
	"io"

	"github.com/hashicorp/go-hclog"
)

func newTestLogger(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug})
}
