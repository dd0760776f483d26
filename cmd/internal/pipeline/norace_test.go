//go:build !race

package pipeline_test

// driftRuns is how often TestReadStableBesideLiveWriter runs the drift
// check (see race_test.go).
const driftRuns = 100
