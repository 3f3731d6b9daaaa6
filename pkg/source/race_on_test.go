//go:build race

package source

// raceEnabled: under the race detector sync.Pool drops reused objects at
// random on purpose, so reuse cannot be measured.
const raceEnabled = true
