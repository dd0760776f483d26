//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

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
