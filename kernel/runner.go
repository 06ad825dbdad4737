package kernel

import _ "embed"

// runnerSource is kernel/runner.py, written to <staging>/runner.py.
//
//go:embed runner.py
var runnerSource []byte
