//go:build !unix

package pool

// noFollow is 0 where the platform has no O_NOFOLLOW; os.Root still keeps
// the open inside the spill dir.
const noFollow = 0
