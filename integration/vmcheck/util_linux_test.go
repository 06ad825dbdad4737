//go:build integration && linux

package vmcheck

import "os"

func writeErr(path, val string) error { return os.WriteFile(path, []byte(val), 0o644) }
