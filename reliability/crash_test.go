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

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
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
// (during startup, migration, sends, ACKs, abandons, retries and key
// rotations) and checks, after every kill, with the database reopened by
// sqlitestore.Open first (so that the store itself meets the hot WAL the
// kill left), that:
//
//   - every database file passes PRAGMA integrity_check;
//   - the sender is keyed: it journals each message's id (and plaintext
//     digest) before SendWithID, and on every start sends the send the
//     kill interrupted again under the same id before anything else;
//     SendWithID reports again exactly when that send had committed, and
//     the row keeps its sequence (a retry, never a second row: no id, and
//     no plaintext, is ever pending in two rows);
//   - every message whose SendWithID returned (journaled "sent" or
//     "resent") is pending with the journaled sequence, recipient and
//     plaintext until a journaled ACK or abandon, and gone after it;
//     nothing else is pending but the interrupted send's own row;
//   - the sequence high-water mark never decreases and no sequence is
//     handed out twice;
//   - every sealed value of the sender is under its current storage key,
//     or (while a rotation is interrupted) under the old or the new one,
//     and storage_key records exactly those;
//   - on the recipients' side, every message their application got and
//     has not finalized or discarded (journaled "got", then no
//     "finalized" or "discarded") is still pending inbound; none that was
//     finalized or discarded is pending again or reaches the application
//     again (a copy handed over again while it is still pending inbound,
//     Message.Again, is not a second delivery); no plaintext reaches it
//     under two ids; every message reaches it with the plaintext sent; and the
//     sender's queue loses a message to an ACK only once the recipient's
//     application has begun to finalize or discard it;
//
// and the next worker run reopens the same files and continues. The only
// uncertainty allowed is the one call the kill interrupted (a journaled
// "begin" without its result). Most runs target one operation (-target),
// chosen so that the operation in flight at the kill is spread over send,
// ACK, abandon and retry (each at least 30 kills) and the recipients'
// receive, finalize and discard (at least 60 kills), with at least 10 send
// kills after the commit, before the send returned (during or before the
// hand-off), rotations and untargeted runs (kills during start-up and
// schema migration) beside them, over at least 1,000 messages. At the end
// the worker must deliver, ACK and so clear every message still pending
// (the sender's queue empty), each having reached the recipient's
// application exactly once: finalized or discarded once, never got after
// that.
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

	c := newCrashChecker(t, dir, secret)
	base := []string{"-dir", dir, "-journal", c.journal, "-key", hex.EncodeToString(secret)}
	args := func(extra ...string) []string {
		a := append(append([]string{}, base...), "-keygen", strconv.Itoa(c.gen))
		if c.rotating {
			a = append(a, "-rotating")
		}
		return append(a, extra...)
	}
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 22))

	// The operations in flight at the kills, by their -target name, and
	// the kills each must have at least (inbound: the recipients'
	// receive, finalize and discard).
	// "commit" counts the send kills that landed after the send's commit,
	// before it returned (during or before the hand-off); its runs target
	// send.
	spread := []string{"send", "recv", "abandon", "retry", "inbound", "commit"}
	least := map[string]int{"send": 30, "recv": 30, "abandon": 30, "retry": 30, "inbound": 60, "commit": 10}
	inflight := map[string]int{}
	count := func(op string) int {
		if op == "commit" {
			return c.stats.committedKills
		}
		return inflight[op]
	}
	missing := func() bool {
		for op, n := range least {
			if count(op) < n*kills/crashKills {
				return true
			}
		}
		return false
	}
	killed, early := 0, 0
	for run := 0; killed < kills || missing(); run++ {
		require.Less(t, killed, 2*kills, "the kills do not reach the operations often enough: %v", inflight)
		var target string
		switch run % 10 {
		case 9: // untargeted: start-up, migrations, the random mix
		case 4:
			target = "rotate"
		default: // the one furthest below its share
			target = spread[0]
			for _, op := range spread {
				if count(op)*least[target] < count(target)*least[op] {
					target = op
				}
			}
			if target == "commit" {
				target = "send"
			}
		}
		extra := []string{"-seed", strconv.Itoa(run)}
		if target != "" {
			extra = append(extra, "-target", target)
		}
		cmd := exec.Command(bin, args(extra...)...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		ready, armed := make(chan struct{}), make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				switch sc.Text() {
				case "ready":
					close(ready)
				case "armed":
					close(armed)
				}
			}
		}()
		switch {
		case target != "":
			// Within 25 ms of the worker starting to repeat the target.
			select {
			case <-armed:
			case <-time.After(20 * time.Second):
				t.Fatalf("run %d: not armed within 20 s; stderr:\n%s", run, stderr.String())
			}
			time.Sleep(time.Duration(rng.IntN(26)) * time.Millisecond)
		case rng.IntN(2) == 0:
			// 5-60 ms after the start: often during open, migration or
			// initialization.
			time.Sleep(time.Duration(5+rng.IntN(56)) * time.Millisecond)
		default:
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
		op := "none"
		if f := c.check(fmt.Sprintf("run %d (killed, target %q)", run, target)); len(f) > 0 {
			op = f[0]
		}
		switch op {
		case "take", "finalize", "discard":
			inflight[op]++
			op = "inbound"
		}
		inflight[op]++
	}

	// No kill: everything still pending must be deliverable, and the
	// client must continue normally afterwards.
	for _, extra := range [][]string{{"-drain"}, {"-ops", "200", "-seed", "999999"}, {"-drain"}} {
		cmd := exec.Command(bin, args(extra...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "worker %v:\n%s", extra, out)
		c.check(fmt.Sprintf("final run %v", extra))
	}
	require.Empty(t, c.pending, "pending after the final drain")
	require.True(t, c.drained, "the final drain ran")
	for addr, held := range c.held {
		require.Empty(t, held, "%s: messages its application holds unfinalized after the final drain", addr)
	}
	for f, n := range c.inboundRows {
		require.Zero(t, n, "%s: pending inbound after the final drain", f)
	}
	require.Nil(t, c.unresolved, "a send interrupted by a kill was never sent again")
	for id := range c.sent {
		require.True(t, c.abandoned[id] || c.got[id], "message %s was acknowledged without reaching the recipient's application", id)
		// Exactly once: got (possibly again while still pending inbound),
		// then finalized or discarded once, never got after that (replay
		// fails on a second finalize or a got after it).
		require.True(t, c.abandoned[id] || c.done[id], "message %s never finalized or discarded by the recipient's application", id)
	}

	mix := make([]string, 0, len(inflight))
	for _, op := range append(append([]string{}, spread...), "take", "finalize", "discard", "rotate", "resend", "none") {
		mix = append(mix, fmt.Sprintf("%s %d (%.0f%%)", op, count(op), 100*float64(count(op))/float64(killed)))
	}
	t.Logf("crash test: %d kills (%d before ready) in %d runs; operation in flight at the kill: %s; sends committed but not returned at the kill (during or before the hand-off): %d; %d resends after a restart (%d again: the interrupted send had committed); %d sends, %d acks, %d abandons, %d rotations journaled; recipients: %d messages got (%d again, while pending inbound), %d finalized, %d discarded; the sender's WAL was hot at %d reopens; high-water mark %d; total %v (worker build %v)",
		killed, early, killed+3, strings.Join(mix, ", "), c.stats.committedKills, c.stats.resent, c.stats.resentAgain, c.stats.sent, c.stats.acked, c.stats.abandoned, c.gen,
		c.stats.got, c.stats.again, c.stats.finalized, c.stats.discarded, c.hotWAL, c.hw, time.Since(start).Round(time.Millisecond), built.Round(time.Millisecond))
	for _, op := range spread {
		require.GreaterOrEqual(t, count(op), least[op]*kills/crashKills, "%s in flight at %d of %d kills", op, count(op), killed)
	}
	require.Positive(t, inflight["rotate"], "no kill landed in a key rotation")
	require.GreaterOrEqual(t, c.stats.sent, 1000*kills/crashKills, "messages sent over the kills")
	require.Positive(t, c.stats.resentAgain, "no resend found its interrupted send committed")
}

// rotationKey is the sender's storage key of generation gen, derived as
// the worker derives it (crashworker's rotationKey).
func rotationKey(t testing.TB, secret []byte, gen int) seal.Key {
	t.Helper()
	raw := secret
	if gen > 0 {
		sum := sha256.Sum256(append([]byte(fmt.Sprintf("crash test rotation key %d:", gen)), secret...))
		raw = sum[:]
	}
	k, err := seal.NewKey(raw)
	require.NoError(t, err)
	return k
}

// journaled is what the journal says about one pending message.
type journaled struct {
	to     store.DeviceAddress
	seq    int64
	digest string
}

// crashChecker replays the worker's journal into a model of the sender's
// pending queue and compares the database with it after every run.
type crashChecker struct {
	t       *testing.T
	dir     string
	journal string
	secret  []byte

	gen      int  // the sender's key generation, per the journal
	rotating bool // a rotation to gen+1 was begun and has not returned
	hotWAL   int  // checks that found the sender's WAL not empty

	offset int64 // journal bytes already replayed
	// unresolved is the send the journal begun without its result: the
	// kill interrupted it, and the next start must send it again under its
	// id (a "begin resend" of it) before anything else.
	unresolved *begunSend
	pending    map[store.LogicalMessageID]journaled
	maxSeq     int64 // largest sequence journaled as sent
	hw         int64 // largest high-water mark seen in the database
	drained    bool

	// The recipients' side, per the journal.
	sent      map[store.LogicalMessageID]string // the plaintext digest of every message sent
	abandoned map[store.LogicalMessageID]bool
	held      map[store.DeviceAddress]map[store.LogicalMessageID]bool // got, not finalized or discarded
	got       map[store.LogicalMessageID]bool                         // reached the application
	gotDigest map[string]store.LogicalMessageID                       // the id each plaintext reached the application under
	begun     map[store.LogicalMessageID]bool                         // a finalize or discard was begun
	done      map[store.LogicalMessageID]bool                         // finalized or discarded
	// inboundRows is each recipient file's pending inbound rows at the
	// last check.
	inboundRows map[string]int

	stats struct {
		sent, acked, abandoned, got, again, finalized, discarded int
		// resent: resends after a restart; resentAgain: those SendWithID
		// reported again (the interrupted send had committed);
		// committedKills: kills that landed in a send after its commit,
		// before its result was journaled (during or before the hand-off).
		resent, resentAgain, committedKills int
	}
}

// begunSend is a "begin send" or "begin resend" line: the application's
// id for the message, chosen and journaled before any storage.
type begunSend struct {
	verb   string
	to     store.DeviceAddress
	hw     int64
	id     store.LogicalMessageID
	digest string
}

func parseBegunSend(f []string) (*begunSend, error) {
	if len(f) != 5 {
		return nil, fmt.Errorf("want 5 fields, got %d", len(f))
	}
	to, err := parseAddr(f[1])
	if err != nil {
		return nil, err
	}
	hw, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return nil, err
	}
	id, err := parseID(f[3])
	if err != nil {
		return nil, err
	}
	return &begunSend{verb: f[0], to: to, hw: hw, id: id, digest: f[4]}, nil
}

func newCrashChecker(t *testing.T, dir string, secret []byte) *crashChecker {
	c := &crashChecker{
		t: t, dir: dir, journal: filepath.Join(dir, "journal"), secret: secret,
		pending: map[store.LogicalMessageID]journaled{},
		sent:    map[store.LogicalMessageID]string{}, abandoned: map[store.LogicalMessageID]bool{},
		held: map[store.DeviceAddress]map[store.LogicalMessageID]bool{},
		got:  map[store.LogicalMessageID]bool{}, gotDigest: map[string]store.LogicalMessageID{}, begun: map[store.LogicalMessageID]bool{}, done: map[store.LogicalMessageID]bool{},
		inboundRows: map[string]int{},
	}
	for _, f := range recipientFiles {
		c.held[f.addr] = map[store.LogicalMessageID]bool{}
	}
	return c
}

// recipientFiles are the recipients' database files and addresses, as the
// worker creates them.
var recipientFiles = []struct {
	file string
	addr store.DeviceAddress
}{{"recipient1.db", bob}, {"recipient2.db", carol}}

func (c *crashChecker) fail(when, format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s", when, fmt.Sprintf(format, args...))
}

func parseAddr(s string) (store.DeviceAddress, error) {
	u, d, ok := strings.Cut(s, "/")
	if !ok {
		return store.DeviceAddress{}, fmt.Errorf("bad address %q", s)
	}
	n, err := strconv.ParseInt(d, 10, 64)
	return store.DeviceAddress{UserID: u, DeviceID: n}, err
}

func parseID(s string) (store.LogicalMessageID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return store.LogicalMessageID{}, err
	}
	return store.ParseLogicalMessageID(b)
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
		if u := c.unresolved; u != nil && len(inflight) == 0 && !(len(f) > 1 && f[0] == "begin" && f[1] == "resend") {
			c.fail(when, "journal: %q before the interrupted send of %s was sent again", line, u.id)
		}
		switch f[0] {
		case "begin":
			if inflight != nil {
				c.fail(when, "journal: %q follows an unfinished %v", line, inflight)
			}
			inflight = f[1:]
			if verb := inflight[0]; verb == "send" || verb == "resend" {
				b, err := parseBegunSend(inflight)
				must(err)
				if u := c.unresolved; verb == "resend" && (u == nil || u.id != b.id || u.to != b.to || u.digest != b.digest) {
					c.fail(when, "journal: %q sends again another message than the interrupted send %+v", line, u)
				}
				if _, ok := c.sent[b.id]; ok && verb == "send" {
					c.fail(when, "journal: %q: the id of a new message is already used", line)
				}
				c.unresolved = b
			}
			if inflight[0] == "rotate" {
				gen, err := strconv.Atoi(inflight[1])
				must(err)
				if gen != c.gen+1 {
					c.fail(when, "journal: rotation to generation %d from %d", gen, c.gen)
				}
				c.rotating = true
			}
			if verb := inflight[0]; verb == "finalize" || verb == "discard" {
				to, err := parseAddr(inflight[1])
				must(err)
				id, err := parseID(inflight[2])
				must(err)
				if !c.held[to][id] {
					c.fail(when, "%s of %s at %s, which its application does not hold", verb, id, to)
				}
				c.begun[id] = true
			}
			continue
		case "sent", "resent":
			// sent <to> <id> <seq> <digest> <again>: the result of the
			// begun send (resent: of the resend after a restart).
			if len(f) != 6 || len(inflight) != 5 || inflight[0] != map[string]string{"sent": "send", "resent": "resend"}[f[0]] ||
				inflight[1] != f[1] || inflight[3] != f[2] || inflight[4] != f[4] {
				c.fail(when, "journal: %q without its begin (%v)", line, inflight)
			}
			b, err := parseBegunSend(inflight)
			must(err)
			seq, err := strconv.ParseInt(f[3], 10, 64)
			must(err)
			again, err := strconv.ParseBool(f[5])
			must(err)
			if p, ok := c.pending[b.id]; ok {
				// Only a resend finds its id pending: the interrupted send
				// had committed (the check after the kill adopted it). It
				// is a retry of that row, not a second one.
				if f[0] != "resent" || !again || p.seq != seq || p.to != b.to || p.digest != b.digest {
					c.fail(when, "journal: %q for %s, pending at seq %d to %s: want a resend with again, same sequence", line, b.id, p.seq, p.to)
				}
				c.stats.resentAgain++
			} else {
				if again {
					c.fail(when, "journal: %q says again, but %s was not pending", line, b.id)
				}
				if _, ok := c.sent[b.id]; ok {
					c.fail(when, "journal: %q: %s was acknowledged or abandoned, and is stored again", line, b.id)
				}
				if seq <= b.hw || seq <= c.maxSeq {
					c.fail(when, "sequence %d reused: high-water mark was %d, largest journaled %d", seq, b.hw, c.maxSeq)
				}
				for other, p := range c.pending {
					if p.digest == b.digest {
						c.fail(when, "journal: %q: the message is pending twice, under %s (seq %d) and %s", line, other, p.seq, b.id)
					}
				}
				c.maxSeq = seq
				c.pending[b.id] = journaled{to: b.to, seq: seq, digest: b.digest}
				c.sent[b.id] = b.digest
				c.stats.sent++
			}
			if f[0] == "resent" {
				c.stats.resent++
			}
			c.unresolved = nil
		case "acked", "abandoned":
			id, err := parseID(f[1])
			must(err)
			if _, ok := c.pending[id]; !ok {
				c.fail(when, "%s %s, which the journal does not hold as pending", f[0], id)
			}
			delete(c.pending, id)
			if f[0] == "acked" {
				if !c.begun[id] {
					c.fail(when, "the ACK of %s reached the sender before the recipient's application finalized or discarded it", id)
				}
				c.stats.acked++
			} else {
				c.abandoned[id] = true
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
		case "rotated":
			gen, err := strconv.Atoi(f[1])
			must(err)
			if len(inflight) < 2 || inflight[0] != "rotate" || inflight[1] != f[1] || gen != c.gen+1 {
				c.fail(when, "journal: %q without its begin (generation %d)", line, c.gen)
			}
			c.gen, c.rotating = gen, false
		case "got":
			if inflight != nil && inflight[0] != "take" {
				c.fail(when, "journal: %q follows an unfinished %v", line, inflight)
			}
			to, err := parseAddr(f[1])
			must(err)
			id, err := parseID(f[2])
			must(err)
			if c.done[id] {
				c.fail(when, "%s reached the application of %s again after it was finalized or discarded", id, to)
			}
			if d, ok := c.sent[id]; !ok || d != f[4] {
				c.fail(when, "%s reached the application of %s with digest %s, sent with %q", id, to, f[4], d)
			}
			if prev, ok := c.gotDigest[f[4]]; ok && prev != id {
				c.fail(when, "the message %s reached the application of %s again, under another id %s", prev, to, id)
			}
			c.gotDigest[f[4]] = id
			if c.held[to][id] {
				c.stats.again++
			}
			c.held[to][id], c.got[id] = true, true
			c.stats.got++
		case "finalized", "discarded":
			id, err := parseID(f[1])
			must(err)
			if len(inflight) < 3 || inflight[0] != map[string]string{"finalized": "finalize", "discarded": "discard"}[f[0]] || inflight[2] != f[1] {
				c.fail(when, "journal: %q without its begin", line)
			}
			to, err := parseAddr(inflight[1])
			must(err)
			if c.done[id] {
				c.fail(when, "%s %s twice", id, f[0])
			}
			c.done[id] = true
			delete(c.held[to], id)
			if f[0] == "finalized" {
				c.stats.finalized++
			} else {
				c.stats.discarded++
			}
		case "innotpending":
			c.fail(when, "a finalize or discard of %s found nothing pending inbound, but the application holds it", f[1])
		case "taken":
			if len(inflight) < 1 || inflight[0] != "take" {
				c.fail(when, "journal: %q without its begin", line)
			}
		case "senderr":
			if len(inflight) < 1 || (inflight[0] != "send" && inflight[0] != "resend") {
				c.fail(when, "journal: %q without its begin", line)
			}
			c.unresolved = nil // the application gives up on it
		case "recverr", "retried":
		default:
			c.fail(when, "unknown journal line %q", line)
		}
		inflight = nil
	}
	c.offset = int64(len(data))
	return inflight
}

// senderKeys is the keyring the sender's database must open with: its
// current key and, while a rotation is interrupted, the next one.
func (c *crashChecker) senderKeys() *seal.Keyring {
	c.t.Helper()
	kr, err := seal.NewKeyring(rotationKey(c.t, c.secret, c.gen))
	require.NoError(c.t, err)
	if c.rotating {
		kr.Add(rotationKey(c.t, c.secret, c.gen+1))
	}
	return kr
}

// check replays the journal and checks every database against it,
// reopening each with sqlitestore.Open first: the store, not a plain
// connection, is what meets the hot WAL a kill leaves. It returns the
// call the kill interrupted (nil if none).
func (c *crashChecker) check(when string) []string {
	c.t.Helper()
	inflight := c.replay(when)
	ctx := context.Background()

	for _, f := range []string{"sender.db", "recipient1.db", "recipient2.db"} {
		path := filepath.Join(c.dir, f)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 && f == "sender.db" {
			c.hotWAL++
		}
		keys := c.senderKeys()
		if f != "sender.db" {
			var err error
			keys, err = seal.NewKeyring(rotationKey(c.t, c.secret, 0))
			require.NoError(c.t, err)
		}
		s, err := sqlitestore.Open(ctx, path, keys)
		if err != nil {
			c.fail(when, "%s: sqlitestore.Open: %v", f, err)
		}
		var res string
		err = sqliteaccess.DB(s).QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res)
		if err == nil && res != "ok" {
			err = fmt.Errorf("integrity_check: %s", res)
		}
		if err == nil && f == "sender.db" {
			err = c.checkSender(ctx, sqliteaccess.DB(s), keys, inflight)
		}
		if err == nil && f == "sender.db" {
			err = c.checkKeys(ctx, sqliteaccess.DB(s))
		}
		if err == nil && f != "sender.db" {
			err = c.checkRecipient(ctx, sqliteaccess.DB(s), f, inflight)
		}
		require.NoError(c.t, s.Close())
		if err != nil {
			c.fail(when, "%s: %v", f, err)
		}
	}
	return inflight
}

// checkKeys checks that every sealed value of the sender (and every
// storage_key row) is under the current key generation or, while a
// rotation is interrupted, the next one; and that a finished rotation
// left only the current key.
func (c *crashChecker) checkKeys(ctx context.Context, db *sql.DB) error {
	allowed := map[seal.KeyID]bool{rotationKey(c.t, c.secret, c.gen).ID(): true}
	if c.rotating {
		allowed[rotationKey(c.t, c.secret, c.gen+1).ID()] = true
	}
	for _, q := range []string{
		"SELECT sealed FROM local_identity", "SELECT sealed FROM identity_pin", "SELECT sealed FROM session",
		"SELECT sealed FROM session_initiation", "SELECT sealed FROM pending_outbound_message",
		"SELECT sealed FROM pending_inbound_message", "SELECT verifier FROM storage_key",
	} {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		for rows.Next() {
			var v []byte
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return err
			}
			h, err := seal.Parse(v)
			if err != nil {
				rows.Close()
				return fmt.Errorf("%s: %w", q, err)
			}
			if !allowed[h.KeyID] {
				rows.Close()
				return fmt.Errorf("%s: a value under key %d, generation %d (rotating %v) allows %v", q, h.KeyID, c.gen, c.rotating, allowed)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	var keys, active int
	if err := db.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM storage_key").Scan(&keys, &active); err != nil {
		return err
	}
	if active != 1 || (!c.rotating && keys != 1) {
		return fmt.Errorf("storage_key holds %d keys, %d active (generation %d, rotating %v)", keys, active, c.gen, c.rotating)
	}
	return nil
}

type dbRow struct {
	to     store.DeviceAddress
	id     store.LogicalMessageID
	seq    int64
	digest string
}

// checkSender compares the sender's pending table with the model, allows
// the interrupted call its one possible effect, and then adopts it.
func (c *crashChecker) checkSender(ctx context.Context, db *sql.DB, keys *seal.Keyring, inflight []string) error {
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
	got := map[store.LogicalMessageID]dbRow{}
	byDigest := map[string]dbRow{}
	var last int64
	for rows.Next() {
		var (
			r         dbRow
			lid, blob []byte
		)
		if err := rows.Scan(&r.seq, &r.to.UserID, &r.to.DeviceID, &lid, &blob); err != nil {
			return err
		}
		if r.id, err = store.ParseLogicalMessageID(lid); err != nil {
			return err
		}
		if prev, dup := got[r.id]; dup {
			return fmt.Errorf("id %s pending in two rows (seq %d to %s, seq %d to %s)", r.id, prev.seq, prev.to, r.seq, r.to)
		}
		if r.seq <= last || r.seq > hw {
			return fmt.Errorf("row sequence %d out of order or above the high-water mark %d", r.seq, hw)
		}
		last = r.seq
		pt, err := keys.Open(seal.RecordPendingOutbound, seal.MessageAD(r.to.UserID, r.to.DeviceID, r.id), blob)
		if err != nil {
			return fmt.Errorf("row %d does not open: %w", r.seq, err)
		}
		sum := sha256.Sum256(pt)
		r.digest = hex.EncodeToString(sum[:8])
		if prev, dup := byDigest[r.digest]; dup {
			return fmt.Errorf("the same message pending in two rows: %s (seq %d) and %s (seq %d)", prev.id, prev.seq, r.id, r.seq)
		}
		byDigest[r.digest] = r
		got[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return err
	}

	// What the interrupted call may have done: a send (or resend) may
	// have added its own row, under its id, above the high-water mark it
	// read; an ACK may have removed one pending message; an abandon its own
	// message. Nothing else.
	var (
		mayAdd    *begunSend
		mayRemove = 0
		removeID  *store.LogicalMessageID
	)
	if len(inflight) > 0 {
		switch inflight[0] {
		case "send", "resend":
			b, err := parseBegunSend(inflight)
			if err != nil {
				return err
			}
			mayAdd = b
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
			if removeID != nil {
				c.abandoned[id] = true
			} else if !c.begun[id] {
				return fmt.Errorf("the ACK of %s reached the sender before the recipient's application finalized or discarded it", id)
			}
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
		if mayAdd == nil || r.id != mayAdd.id || r.to != mayAdd.to || r.digest != mayAdd.digest || r.seq <= mayAdd.hw || r.seq <= c.maxSeq {
			return fmt.Errorf("unexpected pending message %s (seq %d to %s): abandoned, acknowledged or never journaled (interrupted call: %v)", id, r.seq, r.to, inflight)
		}
		mayAdd = nil
		c.stats.committedKills++
		c.maxSeq = r.seq // the interrupted send committed: its sequence is used
		c.pending[id] = journaled{to: r.to, seq: r.seq, digest: r.digest}
		c.sent[id] = r.digest
		c.stats.sent++
	}
	return nil
}

// checkRecipient compares a recipient's pending inbound queue with what
// its application holds per the journal: everything it got and has not
// finalized or discarded is there (but for the one the interrupted call
// may have removed, which is then adopted as removed), and nothing
// finalized or discarded is. Rows the application has not got yet (a
// receive the kill interrupted after its commit) are allowed: the next
// start hands them over.
func (c *crashChecker) checkRecipient(ctx context.Context, db *sql.DB, file string, inflight []string) error {
	var to store.DeviceAddress
	for _, r := range recipientFiles {
		if r.file == file {
			to = r.addr
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT logical_id FROM pending_inbound_message")
	if err != nil {
		return err
	}
	defer rows.Close()
	present := map[store.LogicalMessageID]bool{}
	for rows.Next() {
		var lid []byte
		if err := rows.Scan(&lid); err != nil {
			return err
		}
		id, err := store.ParseLogicalMessageID(lid)
		if err != nil {
			return err
		}
		if c.done[id] {
			return fmt.Errorf("%s is pending inbound again after it was finalized or discarded", id)
		}
		present[id] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	c.inboundRows[file] = len(present)
	for id := range c.held[to] {
		if present[id] {
			continue
		}
		if len(inflight) >= 3 && (inflight[0] == "finalize" || inflight[0] == "discard") && inflight[1] == to.String() && inflight[2] == id.String() {
			c.done[id] = true // the interrupted call removed it
			delete(c.held[to], id)
			continue
		}
		return fmt.Errorf("%s, which the application of %s got and did not finalize, is no longer pending inbound (interrupted call: %v)", id, to, inflight)
	}
	return nil
}
