//go:build !unix

package sqlitestore

import "io/fs"

// writable is true here: the mode bits (readOnly) are what is checked.
func writable(string) bool { return true }

// links is 1 here: the platform's file info gives no link count.
func links(fs.FileInfo) uint64 { return 1 }
