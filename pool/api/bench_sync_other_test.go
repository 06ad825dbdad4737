//go:build unix && !linux

package api_test

import "testing"

// newEpollWatch has no epoll to use here: the benchmark's epoll ways
// then measure a server watching nothing.
func newEpollWatch(testing.TB) hangUpWatch { return noWatch }
