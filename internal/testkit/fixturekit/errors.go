package fixturekit

import "errors"

// ErrNotEmpty means Load was given a file that holds data.
var ErrNotEmpty = errors.New("file exists and is not empty")
