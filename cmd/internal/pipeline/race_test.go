//go:build race

package pipeline_test

// driftRuns is how often TestReadStableBesideLiveWriter runs the drift
// check: under the race detector each run is ten times slower, and 20
// runs still meet the writer on most of them.
const driftRuns = 20
