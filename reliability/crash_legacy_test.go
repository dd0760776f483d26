package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

const (
	// legacyKills is how many times TestCrashLegacyMigration kills the
	// worker inside the legacy migration; RELIABILITY_LEGACY_KILLS
	// overrides it.
	legacyKills = 100
	// legacyExtraRows are added to the fixture's 9 so that the migration
	// lasts long enough (tens of batches, a VACUUM of a few MB) for kills
	// to land all over it.
	legacyExtraRows = 1000
	legacyBatch     = 25 // and the default batch in every fourth run
	// legacyMarker starts every added plaintext: no byte sequence of it may
	// survive the migration anywhere on disk.
	legacyMarker = "LEGACY-CRASH-PLAINTEXT-"
)

type legacyWant struct {
	to        store.DeviceAddress
	id        store.LogicalMessageID
	plaintext []byte
}

// buildLegacyTemplate loads the frozen legacy fixture as it stands (its
// key record, identity, pin and session sealed before the pending queue
// was), adds legacyExtraRows plaintext rows (and deletes the highest, so
// that the high-water mark is above max(sequence)), and returns the rows
// and the high-water mark.
func buildLegacyTemplate(t *testing.T, path string) (map[int64]legacyWant, int64) {
	t.Helper()
	ctx := context.Background()
	text, err := os.ReadFile("../fixtures/legacy/fixture.sql")
	require.NoError(t, err)
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	require.NoError(t, sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, string(text)); err != nil {
			return err
		}
		users := []store.DeviceAddress{{UserID: "bob", DeviceID: 1}, {UserID: "bob", DeviceID: 2}, {UserID: "carol", DeviceID: 3}}
		for i := range legacyExtraRows + 1 {
			pad := make([]byte, 90)
			_, _ = rand.Read(pad)
			pt := fmt.Sprintf("%s%06d:%x", legacyMarker, i, pad)
			id := store.NewLogicalMessageID()
			to := users[i%len(users)]
			if _, err := tx.ExecContext(ctx, "INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, plaintext) VALUES (?, ?, ?, ?)", to.UserID, to.DeviceID, id[:], []byte(pt)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM pending_outbound_message WHERE sequence = (SELECT max(sequence) FROM pending_outbound_message)")
		return err
	}))
	want := map[int64]legacyWant{}
	rows, err := conn.QueryContext(ctx, "SELECT sequence, recipient_user_id, recipient_device_id, logical_id, plaintext FROM pending_outbound_message")
	require.NoError(t, err)
	for rows.Next() {
		var (
			seq int64
			w   legacyWant
			lid []byte
		)
		require.NoError(t, rows.Scan(&seq, &w.to.UserID, &w.to.DeviceID, &lid, &w.plaintext))
		w.id, err = store.ParseLogicalMessageID(lid)
		require.NoError(t, err)
		want[seq] = w
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Len(t, want, 9+legacyExtraRows)
	var hw int64
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = 'pending_outbound_message'").Scan(&hw))
	_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	return want, hw
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// legacyStage classifies a crashed legacy database from a copy of its
// files (the original must meet sqlitestore.Open first, hot WAL and all).
func legacyStage(t *testing.T, path string) string {
	t.Helper()
	side := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, path, side)
	if _, err := os.Stat(path + "-wal"); err == nil {
		copyFile(t, path+"-wal", side+"-wal")
	}
	conn, err := sql.Open(sqlitedriver.Name, "file:"+side)
	require.NoError(t, err)
	defer conn.Close()
	var legacyCols, aside, left int
	require.NoError(t, conn.QueryRow("SELECT count(*) FROM pragma_table_info('pending_outbound_message') WHERE name = 'plaintext'").Scan(&legacyCols))
	require.NoError(t, conn.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'pending_outbound_message_plaintext'").Scan(&aside))
	switch {
	case legacyCols == 1:
		return "not started"
	case aside == 0:
		return "done"
	}
	require.NoError(t, conn.QueryRow("SELECT count(*) FROM pending_outbound_message_plaintext").Scan(&left))
	if left > 0 {
		return "sealing"
	}
	return "erase owed"
}

// TestCrashLegacyMigration kills a worker with SIGKILL at random points of
// the legacy plaintext migration that sqlitestore.Open runs with
// WithLegacyUpgrade (while it sets the table aside, seals batches,
// vacuums, checkpoints, drops the marker), at least legacyKills times, and after every kill opens the
// database with sqlitestore.Open (meeting its hot WAL) and checks that:
//
//   - Open succeeds (it resumes the migration, erase step included);
//   - no byte sequence of any legacy plaintext is left in the database
//     file (free pages included), its WAL or its shared-memory file, while
//     the store is open and after it is closed;
//   - every row is there once, with its sequence, recipient, id and
//     plaintext, and the high-water mark is kept.
func TestCrashLegacyMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	kills := legacyKills
	if v := os.Getenv("RELIABILITY_LEGACY_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "RELIABILITY_LEGACY_KILLS")
		kills = n
	}
	start := time.Now()
	bin := buildWorker(t)
	ctx := context.Background()

	secret := make([]byte, seal.KeySize)
	for i := range secret {
		secret[i] = byte(i)
	}
	key, err := seal.NewKey(secret)
	require.NoError(t, err)
	require.Equal(t, fixturekit.Key().ID(), key.ID(), "the legacy fixture's key")
	template := filepath.Join(t.TempDir(), "template.db")
	want, hw := buildLegacyTemplate(t, template)
	patterns := [][]byte{[]byte(legacyMarker)}
	for _, w := range want {
		if !bytes.HasPrefix(w.plaintext, []byte(legacyMarker)) {
			patterns = append(patterns, w.plaintext) // the fixture's own 9
		}
	}
	require.Len(t, patterns, 10)
	args := []string{"-key", hex.EncodeToString(secret)}

	// run starts the worker on a fresh copy of the template and kills it
	// delay after its start (or after it printed a line starting with
	// after), unless it finished first.
	type runResult struct {
		path    string
		killed  bool
		lines   []string
		took    time.Duration // start to exit
		erasing time.Duration // "progress erase" to exit
	}
	run := func(n int, after string, delay time.Duration) runResult {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(n))
		require.NoError(t, os.MkdirAll(dir, 0o700))
		path := filepath.Join(dir, "legacy.db")
		copyFile(t, template, path)
		// Most runs seal in small batches (many commits to kill between),
		// every fourth with the store's default batch (one here).
		batch := legacyBatch
		if n%4 == 3 {
			batch = 0
		}
		cmd := exec.Command(bin, append(args, "-legacy", path, "-batch", strconv.Itoa(batch))...)
		pr, pw, err := os.Pipe()
		require.NoError(t, err)
		cmd.Stdout = pw
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		began := time.Now()
		require.NoError(t, cmd.Start())
		require.NoError(t, pw.Close())
		seen := make(chan struct{})
		type line struct {
			text string
			at   time.Time
		}
		linesDone := make(chan []line, 1)
		go func() {
			defer pr.Close()
			var lines []line
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				lines = append(lines, line{sc.Text(), time.Now()})
				if after != "" && strings.HasPrefix(sc.Text(), after) && len(lines) > 0 {
					select {
					case <-seen:
					default:
						close(seen)
					}
				}
			}
			linesDone <- lines
		}()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err2 error
		waited := false
		if after != "" {
			select {
			case <-seen:
			case err2 = <-exited:
				waited = true
			case <-time.After(20 * time.Second):
				t.Fatalf("run %d: no %q line within 20 s; stderr:\n%s", n, after, stderr.String())
			}
		}
		if !waited {
			select {
			case <-time.After(delay):
				// The worker may have finished meanwhile: then the kill
				// finds no process, and the run counts as finished.
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
					t.Fatalf("run %d: kill: %v", n, err)
				}
				err2 = <-exited
			case err2 = <-exited:
			}
		}
		ended := time.Now()
		lines := <-linesDone
		// The reader may take the worker's last lines from the pipe after
		// Wait returned: the run ended no earlier than its last line.
		if k := len(lines); k > 0 && lines[k-1].at.After(ended) {
			ended = lines[k-1].at
		}
		res := runResult{path: path, took: ended.Sub(began)}
		for _, l := range lines {
			res.lines = append(res.lines, l.text)
			if strings.HasPrefix(l.text, "progress erase") {
				res.erasing = ended.Sub(l.at)
			}
		}
		var exit *exec.ExitError
		switch {
		case err2 == nil:
			// Finished before the kill.
		case errors.As(err2, &exit):
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "run %d: worker failed (%v); stderr:\n%s", n, err2, stderr.String())
			res.killed = true
		default:
			t.Fatalf("run %d: %v", n, err2)
		}
		return res
	}

	check := func(when, path string) {
		scan := func(phase string) {
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				raw, err := os.ReadFile(f)
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				require.NoError(t, err)
				for _, p := range patterns {
					if i := bytes.Index(raw, p); i >= 0 {
						t.Fatalf("%s, %s: %s holds legacy plaintext %q at offset %d", when, phase, filepath.Base(f), p, i)
					}
				}
			}
		}
		keys, err := seal.NewKeyring(key)
		require.NoError(t, err)
		s, err := sqlitestore.Open(ctx, path, keys, sqlitestore.WithLegacyUpgrade())
		require.NoError(t, err, "%s: reopen", when)
		scan("store open")
		got := 0
		req := store.PageRequest{Limit: store.MaxPageSize}
		for {
			p, err := s.PendingMessages(ctx, req)
			require.NoError(t, err, when)
			for _, m := range p.Messages {
				w, ok := want[m.Sequence]
				require.True(t, ok, "%s: unexpected sequence %d", when, m.Sequence)
				require.Equal(t, w.to, m.Recipient, "%s: sequence %d", when, m.Sequence)
				require.Equal(t, w.id, m.ID, "%s: sequence %d", when, m.Sequence)
				require.Equal(t, w.plaintext, m.Plaintext, "%s: sequence %d", when, m.Sequence)
				got++
			}
			if p.NextAfterSequence == nil {
				break
			}
			req.After = p.NextAfterSequence
		}
		require.Equal(t, len(want), got, "%s: every row once", when)
		n, err := sqliteaccess.SequenceHighWater(ctx, s)
		require.NoError(t, err)
		require.Equal(t, hw, n, "%s: high-water mark kept", when)
		require.NoError(t, s.Close())
		scan("store closed")
	}

	// Calibrate: three runs to the end; the kill window is the fastest
	// (this machine is shared, and a window longer than the run wastes
	// runs that finish before the kill).
	var whole, erasing time.Duration
	for i := range 3 {
		cal := run(-1-i, "", 30*time.Second)
		require.False(t, cal.killed, "calibration run")
		require.Equal(t, fmt.Sprintf("opened %d", len(want)), last(cal.lines))
		require.Positive(t, cal.erasing, "the calibration run reported its erase step")
		if i == 0 || cal.took < whole {
			whole, erasing = cal.took, cal.erasing
		}
		check("calibration", cal.path)
	}
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 5))
	stages := map[string]int{}
	hotWAL, finished, runs := 0, 0, 0
	var checking time.Duration
	for killed := 0; killed < kills; runs++ {
		// Two kills in three land anywhere in the run (start-up included),
		// one in three after the erase step has started.
		var r runResult
		if runs%3 == 2 {
			r = run(runs, "progress erase", time.Duration(rng.Int64N(int64(erasing)+1)))
		} else {
			r = run(runs, "", time.Duration(rng.Int64N(int64(whole)+1)))
		}
		when := fmt.Sprintf("run %d (killed %v, last line %q)", runs, r.killed, last(r.lines))
		if !r.killed {
			finished++
			check(when, r.path)
			continue
		}
		killed++
		stages[legacyStage(t, r.path)]++
		if fi, err := os.Stat(r.path + "-wal"); err == nil && fi.Size() > 0 {
			hotWAL++
		}
		checkStart := time.Now()
		check(when, r.path)
		checking += time.Since(checkStart)
	}
	t.Logf("legacy crash test: %d kills in %d runs (%d finished first), stage at kill %v, %d with a hot WAL at reopen; %d rows, batch %d, uninterrupted run %v (erase step %v); checks after kills %v; total %v",
		kills, runs, finished, stages, hotWAL, len(want), legacyBatch, whole.Round(time.Millisecond), erasing.Round(time.Millisecond), checking.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	for _, st := range []string{"sealing", "erase owed"} {
		require.GreaterOrEqual(t, stages[st], kills/10, "kills while %s: %v", st, stages)
	}
}

func last(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}
