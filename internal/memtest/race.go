//go:build race

package memtest

// RaceEnabled: the race detector's shadow memory multiplies the RSS of
// every allocation, so RSS bounds mean nothing in such a build.
const RaceEnabled = true
