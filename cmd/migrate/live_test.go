package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// besideRuns is how often TestReadsBesideLiveApplication runs each
// read-only command beside each kind of application: few by default, so
// that the suite stays fast; the pipeline's own check is 200
// (go test ./cmd/migrate -run TestReadsBesideLiveApplication -beside.runs 200).
var besideRuns = flag.Int("beside.runs", 10, "runs of each read-only command beside each live application in TestReadsBesideLiveApplication")

// appEnv names the database a child process of the test binary writes
// to as an application (TestApplicationProcess); appKindEnv says how.
const (
	appEnv     = "MIGRATE_TEST_APP_DB"
	appKindEnv = "MIGRATE_TEST_APP_KIND"
)

// Kinds of application TestApplicationProcess is.
const (
	// appCycle opens the store, inserts a message and closes it, in a
	// loop: the -wal and -shm come and go.
	appCycle = "cycle"
	// appHold keeps the store open and inserts messages in a loop.
	appHold = "hold"
)

// TestApplicationProcess is not a test: run as a child process with
// appEnv set, it is an application writing to its database (appKindEnv:
// appCycle or appHold) until its stdin closes. It prints "ready" once it
// has written, and "writes N" when it stops.
func TestApplicationProcess(t *testing.T) {
	path := os.Getenv(appEnv)
	if path == "" {
		t.Skip("only run as the application of TestReadsBesideLiveApplication")
	}
	ctx := context.Background()
	kr := storetest.NewKeyring(t)
	to := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	write := func(s *sqlitestore.Store) {
		_, err := s.InsertPending(ctx, to, store.NewLogicalMessageID(), []byte("beside a migrate run"))
		require.NoError(t, err)
	}
	s, err := sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err)
	write(s)
	cycle := os.Getenv(appKindEnv) == appCycle
	if cycle {
		require.NoError(t, s.Close())
	}
	fmt.Println("ready")
	stopped := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stopped)
	}()
	for n := 1; ; n++ {
		select {
		case <-stopped:
			if !cycle {
				require.NoError(t, s.Close())
			}
			fmt.Println("writes", n)
			return
		default:
		}
		if cycle {
			s, err := sqlitestore.Open(ctx, path, kr)
			require.NoError(t, err)
			write(s)
			require.NoError(t, s.Close())
		} else {
			write(s)
		}
	}
}

// startApplication starts the test binary as an application of the given
// kind on path (TestApplicationProcess) and returns once it has written;
// stop ends it and returns how often it wrote.
func startApplication(t *testing.T, path, kind string) (stop func() int) {
	t.Helper()
	stopChild := migrationtest.StartChild(t, "TestApplicationProcess", appEnv+"="+path, appKindEnv+"="+kind)
	return func() int {
		n := 0
		for _, line := range stopChild() {
			fmt.Sscanf(line, "writes %d", &n)
		}
		return n
	}
}

// TestReadsBesideLiveApplication runs status, plan, drift and lint -db
// on a database at head while an application in another process writes
// to it: one that opens, writes and closes it in a loop (its -wal and
// -shm come and go), and one that holds it open and writes (beside which
// up, with nothing to apply, runs too). Every run
// exits 0, and the directory ends with nothing in it but what the
// application leaves: no empty -wal a reader made, nothing another
// command then refuses.
func TestReadsBesideLiveApplication(t *testing.T) {
	for _, kind := range []string{appCycle, appHold} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "client.db")
			stop := startApplication(t, path, kind)
			start := time.Now()
			failed := 0
			cmds := [][]string{{"status"}, {"plan"}, {"drift"}, {"lint"}}
			if kind == appHold {
				// Nothing to apply: up reads, beside the store holding the
				// writer lock. (Beside the cycling application up would
				// take the lock between its opens, and the application
				// would be refused.)
				cmds = append(cmds, []string{"up"})
			}
			for _, cmd := range cmds {
				for range *besideRuns {
					code, stdout, stderr := runCmd(t, append(cmd, "-db", path)...)
					if code != exitOK {
						failed++
						t.Logf("%s: exit %d\n%s%s", cmd[0], code, stdout, stderr)
					}
				}
			}
			writes := stop()
			t.Logf("%s: %d runs of each of %d commands in %s beside %d writes", kind, *besideRuns, len(cmds), time.Since(start).Round(time.Millisecond), writes)
			require.Zero(t, failed, "runs that failed beside the application")
			require.Greater(t, writes, 1, "the application wrote throughout")

			es, err := os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			for _, e := range es {
				require.True(t, strings.HasPrefix(e.Name(), "client.db"), e.Name())
				if e.Name() == "client.db-wal" {
					fi, err := e.Info()
					require.NoError(t, err)
					require.NotZero(t, fi.Size(), "an empty -wal")
				}
			}
			for _, cmd := range []string{"status", "drift", "up"} {
				code, _, stderr := runCmd(t, cmd, "-db", path)
				require.Equal(t, exitOK, code, "%s after the application stopped: %s", cmd, stderr)
			}
		})
	}
}
