//go:build !race

package uploader

// raceEnabled is set when the tests run under the race detector, which
// inflates memory use.
const raceEnabled = false
