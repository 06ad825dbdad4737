//go:build !linux

package kinit

// Main returns at once: the init step exists on Linux only.
func Main() {}
