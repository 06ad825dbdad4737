//go:build !unix

package kernel

// signalInterrupt: Windows has no SIGINT for a process without a console;
// the kernel is killed instead.
func signalInterrupt(int) error { return ErrUnsupported }

func endOthers(int, []int, []int) int { return 0 }
