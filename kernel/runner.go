package kernel

import _ "embed"

// The runner: kernel/runner.py plus the staged modules it loads by path
// (start-up confinement, displays), all written into the staging dir.
var (
	//go:embed runner.py
	runnerSource []byte
	//go:embed _kernpool_boot.py
	runnerBootSource []byte
	//go:embed _kernpool_display.py
	runnerDisplaySource []byte
	//go:embed _kernpool_errors.py
	runnerErrorsSource []byte
	//go:embed _kernpool_shell.py
	runnerShellSource []byte
	// checkpointSource is kernel/checkpoint.py, staged as checkpointFile
	// beside the runner, which imports it only for checkpoint requests
	// (checkpoint.go).
	//go:embed checkpoint.py
	checkpointSource []byte
)

// checkpointFile is checkpoint.py's name inside the staging dir.
const checkpointFile = CheckpointModule + ".py"

// runnerFiles are the runner's files in the staging dir, by name; spec.Files
// may not replace any of them.
var runnerFiles = map[string][]byte{
	runnerFile:             runnerSource,
	"_kernpool_boot.py":    runnerBootSource,
	"_kernpool_display.py": runnerDisplaySource,
	"_kernpool_errors.py":  runnerErrorsSource,
	"_kernpool_shell.py":   runnerShellSource,
	checkpointFile:         checkpointSource,
}
