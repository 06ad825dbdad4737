//go:build !unix

package envscrub

// noFollow is 0 where the platform has no O_NOFOLLOW; O_EXCL and os.Root
// still refuse an existing file or a link leaving the spill parent.
const noFollow = 0
