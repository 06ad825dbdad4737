// Package testenv holds the capability-skip helpers every package's tests
// share (after nomad's ci.SkipTestWithoutRootAccess): a test that needs
// root, the real python interpreter or a cgroup layout calls one of these
// and skips with a clear reason when the host cannot run it. It also holds
// the test logger. Only _test.go files import it.
package testenv
