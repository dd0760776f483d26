//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// coldNote is empty where the cold-cache lines are measured.
const coldNote = ""

// evict drops the files of the database at path (the main file, its WAL
// and shared-memory files, if present) from the OS page cache: every
// page of them is read from the disk again. The store must be closed, so
// that no page is mapped or dirty.
func evict(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("evict %s: %w", p, err)
		}
	}
	return nil
}

// readSyscalls returns how many read system calls the process has made
// (syscr of /proc/self/io), or -1 if it cannot tell.
func readSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
