//go:build unix

package main

import "syscall"

// openNonBlocking is the flag that keeps an open of a FIFO from waiting
// for a writer.
const openNonBlocking = syscall.O_NONBLOCK
