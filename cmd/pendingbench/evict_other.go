//go:build !linux

package main

import "errors"

// coldNote says why the cold-cache lines are not measured here.
const coldNote = "cold-cache lines skipped: evicting a file from the OS page cache (posix_fadvise DONTNEED) is implemented for Linux only"

// errNoEvict is evict's error where a file cannot be evicted. It lives
// beside coldNote, its message, on the platforms that build both.
var errNoEvict = errors.New(coldNote)

func evict(string) error { return errNoEvict }

// readSyscalls returns -1: the count of read system calls is read from
// /proc on Linux only.
func readSyscalls() int64 { return -1 }
