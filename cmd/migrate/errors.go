package main

import "errors"

// errNotInRepo means a command that reads or writes the repository's files
// was run outside a checkout of it.
var errNotInRepo = errors.New("not inside a checkout of " + modulePath + ": run it from the repository")
