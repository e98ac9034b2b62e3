//go:build linux && race

package clustertest_test

// raceDetector says the tests run under the race detector, which slows every process
// several times over: timing targets are then reported, not asserted.
const raceDetector = true
