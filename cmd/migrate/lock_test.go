package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/dblock"
)

// TestUpLock runs up on a database with a version to apply while its
// writer lock is held: by another up (the loser says so, with its pid),
// by an application (a lock without up's note, or with the note of an up
// that is no longer running), and with -lock-timeout, which waits for a
// lock released meanwhile and gives up, saying how long it waited, on one
// that is not. A refused up changes nothing.
func TestUpLock(t *testing.T) {
	ctx := context.Background()
	held := func(path string) string { return path + "-lock: " + dblock.ErrHeld.Error() }
	deadPID := func(t *testing.T) int {
		p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^$"}, &os.ProcAttr{})
		require.NoError(t, err)
		_, err = p.Wait()
		require.NoError(t, err)
		return p.Pid
	}
	tests := []struct {
		name    string
		hold    func(t *testing.T, path string) *dblock.Lock
		timeout string        // -lock-timeout
		release time.Duration // the holder releases the lock after this, if set
		want    func(path string) string
	}{
		{name: "another up", hold: func(t *testing.T, path string) *dblock.Lock {
			l, err := acquireUpLock(ctx, path, 0)
			require.NoError(t, err)
			return l
		}, want: func(path string) string {
			return fmt.Sprintf("migrate: up: another migrate up (pid %d) holds the writer lock of %s (%s): nothing changed; run up again when it is done, or wait with -lock-timeout\n", os.Getpid(), path, held(path))
		}},
		{name: "an application", hold: func(t *testing.T, path string) *dblock.Lock {
			l, err := dblock.Acquire(path)
			require.NoError(t, err)
			return l
		}, want: func(path string) string {
			return "migrate: up: " + path + " is open in an application (" + held(path) + "): close it and run up again, or wait with -lock-timeout; nothing changed\n"
		}},
		{name: "an application, after an up that was killed", hold: func(t *testing.T, path string) *dblock.Lock {
			l, err := dblock.Acquire(path)
			require.NoError(t, err)
			require.NoError(t, l.SetNote(fmt.Sprintf(upLockNote, deadPID(t))))
			return l
		}, want: func(path string) string {
			return "migrate: up: " + path + " is open in an application (" + held(path) + "): close it and run up again, or wait with -lock-timeout; nothing changed\n"
		}},
		{name: "-lock-timeout gives up", timeout: "150ms", hold: func(t *testing.T, path string) *dblock.Lock {
			l, err := acquireUpLock(ctx, path, 0)
			require.NoError(t, err)
			return l
		}, want: func(path string) string {
			return fmt.Sprintf("migrate: up: another migrate up (pid %d) holds the writer lock of %s (%s) after waiting 150ms: nothing changed; run up again when it is done, or wait with -lock-timeout\n", os.Getpid(), path, held(path))
		}},
		{name: "-lock-timeout waits for the lock", timeout: "1m", release: 200 * time.Millisecond, hold: func(t *testing.T, path string) *dblock.Lock {
			l, err := dblock.Acquire(path)
			require.NoError(t, err)
			return l
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := v14DB(t)
			lock := tt.hold(t, path)
			t.Cleanup(func() { lock.Release() })
			before := snapshot(t, filepath.Dir(path))
			args := []string{"up", "-db", path}
			if tt.timeout != "" {
				args = append(args, "-lock-timeout", tt.timeout)
			}
			if tt.release > 0 {
				released := make(chan struct{})
				time.AfterFunc(tt.release, func() { lock.Release(); close(released) })
				code, stdout, stderr := runCmd(t, args...)
				select {
				case <-released:
				default:
					t.Fatal("up did not wait for the lock")
				}
				require.Equal(t, exitOK, code, stderr)
				require.Equal(t, expand(t, "applied: {above14}\nnow at version {head}\n"), stdout)
				return
			}
			code, stdout, stderr := runCmd(t, args...)
			require.Equal(t, exitError, code)
			require.Empty(t, stdout)
			require.Equal(t, tt.want(path), stderr)
			require.Equal(t, before, snapshot(t, filepath.Dir(path)), "nothing changed")
		})
	}
}
