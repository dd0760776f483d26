//go:build !unix

package main

// openNonBlocking is 0 where no open waits for a FIFO's writer.
const openNonBlocking = 0
