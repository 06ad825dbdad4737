// Package wintest holds test helpers for running kernpool's Windows test
// binaries under Wine (see integration/wine/README.md). On every other
// platform its helpers are the plain testing ones.
package wintest
