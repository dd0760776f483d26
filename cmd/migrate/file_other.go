//go:build !unix

package main

import "io/fs"

// openNonBlocking is 0 where no open waits for a FIFO's writer.
const openNonBlocking = 0

// links is 1 here: the platform's file info gives no link count.
func links(fs.FileInfo) uint64 { return 1 }
