package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// crashKills is how many times TestCrashRecovery kills the worker by
// default; RELIABILITY_CRASH_KILLS overrides it (for longer local runs).
const crashKills = 200

// buildWorker builds the crash worker (without -race: it is the subject,
// not the test) into a temporary directory.
func buildWorker(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "crashworker")
	cmd := exec.Command(goBin, "build", "-o", bin, "./internal/crashworker")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build crashworker:\n%s", out)
	return bin
}

// TestCrashRecovery kills the crash worker with SIGKILL at random moments
// (during startup, migration, sends, ACKs, abandons, retries) and checks,
// after every kill, that:
//
//   - every database file passes PRAGMA integrity_check;
//   - every message whose Send returned (journaled "sent") is pending with
//     the journaled sequence, recipient and plaintext until a journaled
//     ACK or abandon, and gone after it; nothing else is pending;
//   - the sequence high-water mark never decreases and no sequence is
//     handed out twice;
//
// and the next worker run reopens the same files and continues. The only
// uncertainty allowed is the one call the kill interrupted (a journaled
// "begin" without its result). At the end the worker must deliver, ACK and
// so clear every message still pending.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	kills := crashKills
	if v := os.Getenv("RELIABILITY_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "RELIABILITY_CRASH_KILLS")
		kills = n
	}
	start := time.Now()
	bin := buildWorker(t)
	built := time.Since(start)

	dir := t.TempDir()
	secret := make([]byte, seal.KeySize)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	key, err := seal.NewKey(secret)
	require.NoError(t, err)
	keys, err := seal.NewKeyring(key)
	require.NoError(t, err)

	c := &crashChecker{t: t, dir: dir, journal: filepath.Join(dir, "journal"), keys: keys, pending: map[ids.LogicalMessageID]journaled{}}
	args := []string{"-dir", dir, "-journal", c.journal, "-key", hex.EncodeToString(secret)}
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 22))

	killed, early := 0, 0
	for run := 0; killed < kills; run++ {
		cmd := exec.Command(bin, append(args, "-seed", strconv.Itoa(run))...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(ready)
				}
			}
		}()
		// Half of the kills land at 5-60 ms after the start (often during
		// open, migration or initialization), half at 0-30 ms after
		// "ready" (in the middle of operations).
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(5+rng.IntN(56)) * time.Millisecond)
		} else {
			select {
			case <-ready:
			case <-time.After(10 * time.Second):
				t.Fatalf("run %d: no ready within 10 s; stderr:\n%s", run, stderr.String())
			}
			time.Sleep(time.Duration(rng.IntN(31)) * time.Millisecond)
		}
		select {
		case <-ready:
		default:
			early++
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err = cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "run %d: worker ended with %v; stderr:\n%s", run, err, stderr.String())
		ws, ok := exit.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
			"run %d: worker exited by itself (%v) before the kill; stderr:\n%s", run, err, stderr.String())
		killed++
		c.check(fmt.Sprintf("run %d (killed)", run))
	}

	// No kill: everything still pending must be deliverable, and the
	// client must continue normally afterwards.
	for _, extra := range [][]string{{"-drain"}, {"-ops", "200", "-seed", "999999"}, {"-drain"}} {
		cmd := exec.Command(bin, append(args, extra...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "worker %v:\n%s", extra, out)
		c.check(fmt.Sprintf("final run %v", extra))
	}
	require.Empty(t, c.pending, "pending after the final drain")
	require.True(t, c.drained, "the final drain ran")

	t.Logf("crash test: %d kills (%d before ready) in %d runs, %d sends, %d acks, %d abandons journaled; high-water mark %d; total %v (worker build %v)",
		killed, early, killed+3, c.stats.sent, c.stats.acked, c.stats.abandoned, c.hw, time.Since(start).Round(time.Millisecond), built.Round(time.Millisecond))
}

// journaled is what the journal says about one pending message.
type journaled struct {
	to     ids.DeviceAddress
	seq    int64
	digest string
}

// crashChecker replays the worker's journal into a model of the sender's
// pending queue and compares the database with it after every run.
type crashChecker struct {
	t       *testing.T
	dir     string
	journal string
	keys    *seal.Keyring

	offset  int64 // journal bytes already replayed
	pending map[ids.LogicalMessageID]journaled
	maxSeq  int64 // largest sequence journaled as sent
	hw      int64 // largest high-water mark seen in the database
	drained bool
	stats   struct{ sent, acked, abandoned int }
}

func (c *crashChecker) fail(when, format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s", when, fmt.Sprintf(format, args...))
}

func parseAddr(s string) (ids.DeviceAddress, error) {
	u, d, ok := strings.Cut(s, "/")
	if !ok {
		return ids.DeviceAddress{}, fmt.Errorf("bad address %q", s)
	}
	n, err := strconv.ParseInt(d, 10, 64)
	return ids.DeviceAddress{UserID: u, DeviceID: n}, err
}

func parseID(s string) (ids.LogicalMessageID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return ids.LogicalMessageID{}, err
	}
	return ids.ParseLogicalMessageID(b)
}

// replay applies the journal lines written since the last check to the
// model and returns the interrupted call, if any (fields of its "begin"
// line, without "begin"). A partial last line (the kill cut the write) is
// truncated away: its call counts as interrupted.
func (c *crashChecker) replay(when string) []string {
	c.t.Helper()
	data, err := os.ReadFile(c.journal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(c.t, err)
	if end := int64(bytes.LastIndexByte(data, '\n') + 1); end < int64(len(data)) {
		require.NoError(c.t, os.Truncate(c.journal, end))
		data = data[:end]
	}
	var inflight []string
	for _, line := range strings.Split(string(data[c.offset:]), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		must := func(err error) {
			if err != nil {
				c.fail(when, "journal line %q: %v", line, err)
			}
		}
		switch f[0] {
		case "begin":
			if inflight != nil {
				c.fail(when, "journal: %q follows an unfinished %v", line, inflight)
			}
			inflight = f[1:]
			continue
		case "sent":
			to, err := parseAddr(f[1])
			must(err)
			id, err := parseID(f[2])
			must(err)
			seq, err := strconv.ParseInt(f[3], 10, 64)
			must(err)
			if len(inflight) < 3 || inflight[0] != "send" {
				c.fail(when, "journal: %q without its begin", line)
			}
			hw, err := strconv.ParseInt(inflight[2], 10, 64)
			must(err)
			if seq <= hw || seq <= c.maxSeq {
				c.fail(when, "sequence %d reused: high-water mark was %d, largest journaled %d", seq, hw, c.maxSeq)
			}
			if _, dup := c.pending[id]; dup {
				c.fail(when, "id %s sent twice", id)
			}
			c.maxSeq = seq
			c.pending[id] = journaled{to: to, seq: seq, digest: f[4]}
			c.stats.sent++
		case "acked", "abandoned":
			id, err := parseID(f[1])
			must(err)
			if _, ok := c.pending[id]; !ok {
				c.fail(when, "%s %s, which the journal does not hold as pending", f[0], id)
			}
			delete(c.pending, id)
			if f[0] == "acked" {
				c.stats.acked++
			} else {
				c.stats.abandoned++
			}
		case "ackmiss":
			id, err := parseID(f[1])
			must(err)
			if _, ok := c.pending[id]; ok {
				c.fail(when, "ACK of %s found nothing pending, but the journal holds it as pending", id)
			}
		case "notpending":
			id, err := parseID(f[1])
			must(err)
			to, err := parseAddr(inflight[1])
			must(err)
			if p, ok := c.pending[id]; ok && p.to == to {
				c.fail(when, "abandon of %s said NOT_PENDING, but the journal holds it as pending", id)
			}
		case "drained":
			if len(c.pending) != 0 {
				c.fail(when, "worker drained, but the journal holds %d pending", len(c.pending))
			}
			c.drained = true
		case "senderr", "recverr", "retried":
		default:
			c.fail(when, "unknown journal line %q", line)
		}
		inflight = nil
	}
	c.offset = int64(len(data))
	return inflight
}

func (c *crashChecker) check(when string) {
	c.t.Helper()
	inflight := c.replay(when)
	ctx := context.Background()

	for _, f := range []string{"sender.db", "recipient1.db", "recipient2.db"} {
		path := filepath.Join(c.dir, f)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		db, err := sql.Open("sqlite3", sqlitestore.DSN(path))
		require.NoError(c.t, err)
		var res string
		err = db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res)
		if err == nil && res != "ok" {
			err = fmt.Errorf("integrity_check: %s", res)
		}
		if err == nil && f == "sender.db" {
			err = c.checkSender(ctx, when, db, inflight)
		}
		require.NoError(c.t, db.Close())
		if err != nil {
			c.fail(when, "%s: %v", f, err)
		}
	}
}

type dbRow struct {
	to     ids.DeviceAddress
	id     ids.LogicalMessageID
	seq    int64
	digest string
}

// checkSender compares the sender's pending table with the model, allows
// the interrupted call its one possible effect, and then adopts it.
func (c *crashChecker) checkSender(ctx context.Context, when string, db *sql.DB, inflight []string) error {
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'pending_outbound_message'").Scan(&tables); err != nil {
		return err
	}
	if tables == 0 {
		// Killed before the first migration committed.
		if len(c.pending) != 0 || c.hw != 0 {
			return fmt.Errorf("pending_outbound_message is gone (model holds %d, high-water mark %d)", len(c.pending), c.hw)
		}
		return nil
	}
	var hw int64
	if err := db.QueryRowContext(ctx, "SELECT CAST(coalesce(max(seq), 0) AS INTEGER) FROM sqlite_sequence WHERE name = 'pending_outbound_message'").Scan(&hw); err != nil {
		return fmt.Errorf("high-water mark: %w", err)
	}
	if hw < c.hw || hw < c.maxSeq {
		return fmt.Errorf("sequence high-water mark went back to %d (seen %d, journaled %d)", hw, c.hw, c.maxSeq)
	}
	c.hw = hw

	rows, err := db.QueryContext(ctx, "SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed FROM pending_outbound_message ORDER BY sequence")
	if err != nil {
		return err
	}
	defer rows.Close()
	got := map[ids.LogicalMessageID]dbRow{}
	var last int64
	for rows.Next() {
		var (
			r         dbRow
			lid, blob []byte
		)
		if err := rows.Scan(&r.seq, &r.to.UserID, &r.to.DeviceID, &lid, &blob); err != nil {
			return err
		}
		if r.id, err = ids.ParseLogicalMessageID(lid); err != nil {
			return err
		}
		if r.seq <= last || r.seq > hw {
			return fmt.Errorf("row sequence %d out of order or above the high-water mark %d", r.seq, hw)
		}
		last = r.seq
		pt, err := c.keys.Open(seal.RecordPendingOutbound, store.MessageAD(r.to, r.id), blob)
		if err != nil {
			return fmt.Errorf("row %d does not open: %w", r.seq, err)
		}
		sum := sha256.Sum256(pt)
		r.digest = hex.EncodeToString(sum[:8])
		got[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return err
	}

	// What the interrupted call may have done: a send may have added one
	// row above the high-water mark it read; an ACK may have removed one
	// pending message; an abandon its own message. Nothing else.
	var (
		mayAdd    *ids.DeviceAddress
		addAbove  int64
		mayRemove = 0
		removeID  *ids.LogicalMessageID
	)
	if len(inflight) > 0 {
		switch inflight[0] {
		case "send":
			to, err := parseAddr(inflight[1])
			if err != nil {
				return err
			}
			mayAdd = &to
			if addAbove, err = strconv.ParseInt(inflight[2], 10, 64); err != nil {
				return err
			}
		case "recv":
			mayRemove = 1
		case "abandon":
			id, err := parseID(inflight[2])
			if err != nil {
				return err
			}
			mayRemove, removeID = 1, &id
		}
	}
	for id, want := range c.pending {
		r, ok := got[id]
		if !ok {
			if mayRemove == 0 || (removeID != nil && *removeID != id) {
				return fmt.Errorf("pending message %s (seq %d to %s) lost (interrupted call: %v)", id, want.seq, want.to, inflight)
			}
			mayRemove--
			delete(c.pending, id) // the interrupted call removed it
			continue
		}
		if r.seq != want.seq || r.to != want.to || r.digest != want.digest {
			return fmt.Errorf("pending message %s: seq %d to %s digest %s, journaled seq %d to %s digest %s", id, r.seq, r.to, r.digest, want.seq, want.to, want.digest)
		}
	}
	for id, r := range got {
		if _, ok := c.pending[id]; ok {
			continue
		}
		if mayAdd == nil || r.to != *mayAdd || r.seq <= addAbove || r.seq <= c.maxSeq {
			return fmt.Errorf("unexpected pending message %s (seq %d to %s): abandoned, acknowledged or never journaled (interrupted call: %v)", id, r.seq, r.to, inflight)
		}
		mayAdd = nil
		c.maxSeq = r.seq // the interrupted send committed: its sequence is used
		c.pending[id] = journaled{to: r.to, seq: r.seq, digest: r.digest}
	}
	return nil
}
