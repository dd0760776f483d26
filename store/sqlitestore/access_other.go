//go:build !unix

package sqlitestore

// writable is true here: the mode bits (readOnly) are what is checked.
func writable(string) bool { return true }
