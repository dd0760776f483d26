//go:build race

package client_test

// raceDetector is set when the tests run with -race, which makes each
// initiation a test builds about ten times dearer.
const raceDetector = true
