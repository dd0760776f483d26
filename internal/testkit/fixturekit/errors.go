package fixturekit

import "errors"

// ErrNotEmpty means Load was given a file that holds data.
var ErrNotEmpty = errors.New("frozen: load: file exists and is not empty")
