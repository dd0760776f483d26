package reliability_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// countRig is a SQLite store behind the fault driver, a second connection
// to the same file (another writer, and the count(*) reference), and a
// model of which messages are pending.
type countRig struct {
	t     *testing.T
	ctx   context.Context
	inj   *injector
	drv   string
	path  string
	keys  *seal.Keyring
	s     *sqlitestore.Store
	other *sql.DB
	// pending is the model: the messages that must be pending, and their
	// sequences.
	pending map[pendingKey]int64
	ids     int
}

type pendingKey struct {
	r  store.DeviceAddress
	id store.LogicalMessageID
}

var countRecipients = []store.DeviceAddress{bob, carol, {UserID: "dave", DeviceID: 3}}

func newCountRig(t *testing.T) *countRig {
	t.Helper()
	g := &countRig{t: t, ctx: context.Background(), inj: &injector{}, keys: newKeyring(t),
		path: filepath.Join(t.TempDir(), "count.db"), pending: map[pendingKey]int64{}}
	g.drv = registerFaultDriver(t, g.inj)
	g.reopen()
	other, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(g.path))
	require.NoError(t, err)
	other.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = other.Close() })
	g.other = other
	return g
}

// reopen closes the store (if open) and opens it again: a restart.
func (g *countRig) reopen() {
	g.t.Helper()
	if g.s != nil {
		require.NoError(g.t, g.s.Close())
	}
	s, err := sqlitestore.Open(sqliteaccess.WithDriver(g.ctx, g.drv), g.path, g.keys)
	require.NoError(g.t, err)
	g.t.Cleanup(func() { _ = s.Close() })
	g.s = s
}

func (g *countRig) newID() store.LogicalMessageID {
	var id store.LogicalMessageID
	g.ids++
	copy(id[:], fmt.Sprintf("count-msg-%06d", g.ids))
	return id
}

// anyPending returns a pending message of the model, or a never-sent one.
func (g *countRig) anyPending(rng *rand.Rand) pendingKey {
	for k := range g.pending { // map order is random enough here
		if rng.IntN(3) > 0 {
			return k
		}
	}
	return pendingKey{countRecipients[rng.IntN(len(countRecipients))], g.newID()}
}

func (g *countRig) isPending(k pendingKey) bool {
	_, ok := g.pending[k]
	return ok
}

// fanoutPeers returns two or three distinct recipients, in random order,
// each with update.
func fanoutPeers(rng *rand.Rand, update store.PeerState) []store.PeerUpdate {
	var out []store.PeerUpdate
	for _, i := range rng.Perm(len(countRecipients))[:2+rng.IntN(2)] {
		out = append(out, store.PeerUpdate{Peer: countRecipients[i], Update: update})
	}
	return out
}

// externalInsert inserts a pending message through the other connection,
// as another process writing the same database would.
func (g *countRig) externalInsert(k pendingKey) {
	g.t.Helper()
	sealed, err := g.keys.Seal(seal.RecordPendingOutbound, seal.MessageAD(k.r.UserID, k.r.DeviceID, k.id), []byte("written by another connection"))
	require.NoError(g.t, err)
	seq, err := db.New(g.other).InsertPendingOutbound(g.ctx, db.InsertPendingOutboundParams{
		RecipientUserID: k.r.UserID, RecipientDeviceID: k.r.DeviceID, LogicalID: k.id[:], Sealed: sealed,
	})
	require.NoError(g.t, err)
	g.pending[k] = seq
}

func (g *countRig) externalDelete(k pendingKey) {
	g.t.Helper()
	n, err := db.New(g.other).DeletePendingOutbound(g.ctx, db.DeletePendingOutboundParams{
		RecipientUserID: k.r.UserID, RecipientDeviceID: k.r.DeviceID, LogicalID: k.id[:],
	})
	require.NoError(g.t, err)
	require.Equal(g.t, g.isPending(k), n == 1)
	delete(g.pending, k)
}

// check asserts that the store's count equals SELECT count(*) and the
// model, for all recipients and for each one.
func (g *countRig) check(step string) {
	g.t.Helper()
	g.inj.reset()
	truth, err := db.New(g.other).CountPendingOutbound(g.ctx)
	require.NoError(g.t, err, step)
	fast, err := g.s.PendingMessageCount(g.ctx, nil)
	require.NoError(g.t, err, step)
	require.Equal(g.t, truth, fast, "%s: the store's count differs from SELECT count(*)", step)
	require.Equal(g.t, int64(len(g.pending)), truth, "%s: the table differs from the model", step)
	for _, r := range countRecipients {
		want := int64(0)
		for k := range g.pending {
			if k.r == r {
				want++
			}
		}
		n, err := g.s.PendingMessageCount(g.ctx, &r)
		require.NoError(g.t, err, step)
		require.Equal(g.t, want, n, "%s: count for %s", step, r)
	}
}

var countSession = []byte("a session state the store seals and never reads")

// TestCountProperty runs random sequences of sends (single and fan-out),
// ACKs, abandons (by recipient and id, and by sequence),
// rolled-back writes, injected faults (statements, commits, a dropped
// connection), writes by another connection and restarts, and checks
// after every step that the store's count of all pending messages equals
// SELECT count(*) (and the model).
func TestCountProperty(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := newCountRig(t)
			rng := rand.New(rand.NewPCG(seed, 0x636f756e74))
			ctx := g.ctx
			update := store.PeerState{Session: countSession}
			type op struct {
				name string
				do   func()
			}
			ops := []op{
				{"insert", func() {
					k := pendingKey{countRecipients[rng.IntN(3)], g.newID()}
					seq, err := g.s.InsertPending(ctx, k.r, k.id, []byte("hello"))
					require.NoError(t, err)
					g.pending[k] = seq
				}},
				{"send (row and session in one transaction)", func() {
					k := pendingKey{countRecipients[rng.IntN(3)], g.newID()}
					seq, err := g.s.CommitSend(ctx, k.r, k.id, []byte("hello"), update)
					require.NoError(t, err)
					g.pending[k] = seq
				}},
				{"fan-out send (rows and sessions in one transaction)", func() {
					id := g.newID()
					peers := fanoutPeers(rng, update)
					seqs, err := g.s.CommitSendMany(ctx, id, []byte("hello all"), peers)
					require.NoError(t, err)
					require.Len(t, seqs, len(peers))
					for i, p := range peers {
						g.pending[pendingKey{p.Peer, id}] = seqs[i]
					}
				}},
				{"fan-out send refused at its last device (rolled back)", func() {
					k := g.anyPending(rng)
					if !g.isPending(k) {
						return
					}
					var peers []store.PeerUpdate
					for _, r := range countRecipients {
						if r != k.r {
							peers = append(peers, store.PeerUpdate{Peer: r, Update: update})
						}
					}
					peers = append(peers, store.PeerUpdate{Peer: k.r, Update: update})
					_, err := g.s.CommitSendMany(ctx, k.id, []byte("again"), peers)
					require.ErrorIs(t, err, store.ErrDuplicate)
				}},
				{"fan-out send whose commit fails", func() {
					g.inj.fail(fault{Op: opCommit, Match: sqlInsertPending})
					_, err := g.s.CommitSendMany(ctx, g.newID(), []byte("hello all"), fanoutPeers(rng, update))
					require.ErrorIs(t, err, errInjected)
				}},
				{"duplicate insert (rolled back)", func() {
					if len(g.pending) == 0 {
						return
					}
					k := g.anyPending(rng)
					if !g.isPending(k) {
						return
					}
					_, err := g.s.CommitSend(ctx, k.r, k.id, []byte("again"), update)
					require.ErrorIs(t, err, store.ErrDuplicate)
				}},
				{"send whose session save fails after the row was inserted", func() {
					g.inj.fail(fault{Op: opStmt, Match: sqlInsertSession})
					_, err := g.s.CommitSend(ctx, countRecipients[rng.IntN(3)], g.newID(), []byte("hello"), update)
					require.ErrorIs(t, err, errInjected)
				}},
				{"insert whose commit fails", func() {
					g.inj.fail(fault{Op: opCommit, Match: sqlInsertPending})
					_, err := g.s.InsertPending(ctx, countRecipients[rng.IntN(3)], g.newID(), []byte("hello"))
					require.ErrorIs(t, err, errInjected)
				}},
				{"insert whose statement fails", func() {
					g.inj.fail(fault{Op: opStmt, Match: sqlInsertPending})
					_, err := g.s.InsertPending(ctx, countRecipients[rng.IntN(3)], g.newID(), []byte("hello"))
					require.ErrorIs(t, err, errInjected)
				}},
				{"abandon", func() {
					k := g.anyPending(rng)
					ok, err := g.s.AbandonPending(ctx, k.r, k.id)
					require.NoError(t, err)
					require.Equal(t, g.isPending(k), ok)
					delete(g.pending, k)
				}},
				{"abandon by sequence", func() {
					k := g.anyPending(rng)
					seq, pending := g.pending[k]
					if !pending {
						seq = 1 << 40 // never handed out
					}
					ok, err := g.s.AbandonPendingMessage(ctx, store.PendingMessage{Sequence: seq, Recipient: k.r, ID: k.id})
					require.NoError(t, err)
					require.Equal(t, pending, ok)
					delete(g.pending, k)
				}},
				{"abandon by sequence whose commit fails", func() {
					k := g.anyPending(rng)
					g.inj.fail(fault{Op: opCommit, Match: sqlDeletePending})
					_, err := g.s.AbandonPendingMessage(ctx, store.PendingMessage{Sequence: g.pending[k], Recipient: k.r, ID: k.id})
					require.ErrorIs(t, err, errInjected)
				}},
				{"abandon whose commit fails", func() {
					k := g.anyPending(rng)
					g.inj.fail(fault{Op: opCommit, Match: sqlDeletePending})
					_, err := g.s.AbandonPending(ctx, k.r, k.id)
					require.ErrorIs(t, err, errInjected)
				}},
				{"ACK", func() {
					k := g.anyPending(rng)
					ok, err := g.s.CommitAck(ctx, k.r, k.id, store.Inbound{Update: update})
					require.NoError(t, err)
					require.Equal(t, g.isPending(k), ok)
					delete(g.pending, k)
				}},
				{"ACK whose delete fails after the session was saved", func() {
					k := g.anyPending(rng)
					g.inj.fail(fault{Op: opStmt, Match: sqlDeletePending})
					_, err := g.s.CommitAck(ctx, k.r, k.id, store.Inbound{Update: update})
					require.ErrorIs(t, err, errInjected)
				}},
				{"ACK whose commit fails", func() {
					k := g.anyPending(rng)
					g.inj.fail(fault{Op: opCommit, Match: sqlDeletePending})
					_, err := g.s.CommitAck(ctx, k.r, k.id, store.Inbound{Update: update})
					require.ErrorIs(t, err, errInjected)
				}},
				{"received message (no pending row)", func() {
					_, err := g.s.CommitReceived(ctx, countRecipients[rng.IntN(3)], g.newID(), nil, store.Inbound{Update: update})
					require.NoError(t, err)
				}},
				{"connection dropped after a rolled-back insert, then another writer inserts", func() {
					opens := g.inj.opens.Load()
					g.inj.fail(fault{Op: opBadConn, Match: sqlInsertPending})
					g.inj.fail(fault{Op: opStmt, Match: sqlInsertSession})
					_, err := g.s.CommitSend(ctx, countRecipients[rng.IntN(3)], g.newID(), []byte("hello"), update)
					require.ErrorIs(t, err, errInjected)
					g.externalInsert(pendingKey{countRecipients[rng.IntN(3)], g.newID()})
					_, err = g.s.PendingMessageCount(ctx, &bob) // any call: opens the new connection
					require.NoError(t, err)
					require.Equal(t, opens+1, g.inj.opens.Load(), "the connection was replaced")
				}},
				{"connection dropped after a failed session save, then another writer inserts", func() {
					g.inj.fail(fault{Op: opBadConn, Match: sqlInsertSession})
					g.inj.fail(fault{Op: opStmt, Match: sqlInsertSession})
					err := g.s.SavePeer(ctx, countRecipients[rng.IntN(3)], update)
					require.ErrorIs(t, err, errInjected)
					g.externalInsert(pendingKey{countRecipients[rng.IntN(3)], g.newID()})
				}},
				{"another connection inserts", func() {
					g.externalInsert(pendingKey{countRecipients[rng.IntN(3)], g.newID()})
				}},
				{"another connection deletes", func() {
					g.externalDelete(g.anyPending(rng))
				}},
				{"restart", func() { g.reopen() }},
			}
			g.check("open")
			for step := range 250 {
				o := ops[rng.IntN(len(ops))]
				o.do()
				g.check(fmt.Sprintf("step %d (%s)", step, o.name))
			}
		})
	}
}

// TestCountSeesAnotherWriter: once the store has counted, another
// connection's insert and delete show in the next count (PRAGMA
// data_version changed), though the store's own writes never re-read.
func TestCountSeesAnotherWriter(t *testing.T) {
	g := newCountRig(t)
	for range 3 {
		k := pendingKey{bob, g.newID()}
		seq, err := g.s.InsertPending(g.ctx, k.r, k.id, []byte("hello"))
		require.NoError(t, err)
		g.pending[k] = seq
	}
	g.check("store's own inserts")
	g.externalInsert(pendingKey{carol, g.newID()})
	g.check("after another connection inserted")
	g.externalDelete(g.anyPending(rand.New(rand.NewPCG(1, 2))))
	g.check("after another connection deleted")
}

// TestCountAfterConnectionReplaced: a fresh connection's data_version is
// not comparable with the old one's (both start from the same value), so
// after any failed transaction, which may have made database/sql replace
// the connection, the next count asks SQLite. The failing transaction is
// a pending write in one case and a session save, which touches no
// pending row, in the other.
func TestCountAfterConnectionReplaced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match string
		fail  func(g *countRig, k pendingKey) error
	}{
		{"duplicate insert", sqlInsertPending, func(g *countRig, k pendingKey) error {
			_, err := g.s.InsertPending(g.ctx, k.r, k.id, []byte("again"))
			return err
		}},
		{"session save", sqlInsertSession, func(g *countRig, k pendingKey) error {
			g.inj.fail(fault{Op: opStmt, Match: sqlInsertSession})
			return g.s.SavePeer(g.ctx, k.r, store.PeerState{Session: countSession})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newCountRig(t)
			k := pendingKey{bob, g.newID()}
			seq, err := g.s.InsertPending(g.ctx, k.r, k.id, []byte("hello"))
			require.NoError(t, err)
			g.pending[k] = seq
			g.check("established")
			opens := g.inj.opens.Load()
			g.inj.fail(fault{Op: opBadConn, Match: tc.match})
			require.Error(t, tc.fail(g, k))
			g.externalInsert(pendingKey{carol, g.newID()})
			g.check("after the connection was replaced and another connection inserted")
			require.Equal(t, opens+1, g.inj.opens.Load(), "the connection was replaced")
		})
	}
}

// TestCountNoWindowWhileConnectionReplaced: a count that waits for the
// connection while another transaction fails on it, and database/sql
// replaces the connection, must not trust the in-memory count with the
// new connection's data_version. The failing transaction (a session save,
// holding the connection in its failing statement) lets the count line
// up behind it (database/sql's wait counter says when), then fails and
// has its connection discarded; the count runs on the fresh connection,
// whose data_version equals the one the in-memory count was taken with,
// while another connection inserted a row the old connection never saw.
// The count must be SELECT count(*)'s, however the failure is recorded
// after the connection went back to the pool.
func TestCountNoWindowWhileConnectionReplaced(t *testing.T) {
	g := newCountRig(t)
	k := pendingKey{bob, g.newID()}
	seq, err := g.s.InsertPending(g.ctx, k.r, k.id, []byte("hello"))
	require.NoError(t, err)
	g.pending[k] = seq
	g.check("established")
	g.externalInsert(pendingKey{carol, g.newID()})
	truth := int64(len(g.pending))

	hold, reached := make(chan struct{}), make(chan struct{})
	g.inj.fail(fault{Op: opStmt, Match: sqlInsertSession, Hold: hold, Reached: reached})
	g.inj.fail(fault{Op: opBadConn, Match: sqlInsertSession})
	opens := g.inj.opens.Load()
	saved := make(chan error, 1)
	go func() { saved <- g.s.SavePeer(g.ctx, bob, store.PeerState{Session: countSession}) }()
	<-reached // the save holds the only connection

	waits := sqliteaccess.DB(g.s).Stats().WaitCount
	counted := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = g.s.PendingMessageCount(g.ctx, nil)
		counted <- err
	}()
	for sqliteaccess.DB(g.s).Stats().WaitCount == waits {
		runtime.Gosched() // until the count waits for the connection
	}
	close(hold)
	require.ErrorIs(t, <-saved, errInjected)
	require.NoError(t, <-counted)
	require.Equal(t, opens+1, g.inj.opens.Load(), "the connection was replaced")
	require.Equal(t, truth, n, "the count ran on the new connection with the old in-memory number")
	g.check("after")
}

// TestCountConcurrent runs inserts, deletes and counts from several
// goroutines on one store (under -race), then checks the count.
func TestCountConcurrent(t *testing.T) {
	g := newCountRig(t)
	const workers, each = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := countRecipients[w%len(countRecipients)]
			for i := range each {
				var id store.LogicalMessageID
				copy(id[:], fmt.Sprintf("conc-%d-%06d", w, i))
				if _, err := g.s.InsertPending(g.ctx, r, id, []byte("hello")); err != nil {
					errs <- err
					return
				}
				if _, err := g.s.PendingMessageCount(g.ctx, nil); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if _, err := g.s.AbandonPending(g.ctx, r, id); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	truth, err := db.New(g.other).CountPendingOutbound(g.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(workers*each/2), truth)
	n, err := g.s.PendingMessageCount(g.ctx, nil)
	require.NoError(t, err)
	require.Equal(t, truth, n)
}

// sqlCountAll is the store's SELECT count(*) of all pending messages (the
// generated query's name line: the per-recipient count has another).
const sqlCountAll = "-- name: CountPendingOutbound :one"

// TestCountServedFromMemory: once established, the count of all pending
// messages follows the store's own sends, fan-outs, ACKs and abandons
// without running SELECT count(*) (a fault armed on it never fires), and
// runs it again as soon as another connection has written.
func TestCountServedFromMemory(t *testing.T) {
	g := newCountRig(t)
	ctx := g.ctx
	update := store.PeerState{Session: countSession}
	k := pendingKey{bob, g.newID()}
	seq, err := g.s.InsertPending(ctx, k.r, k.id, []byte("hello"))
	require.NoError(t, err)
	g.pending[k] = seq
	g.check("established")

	g.inj.fail(fault{Op: opStmt, Match: sqlCountAll})
	id := g.newID()
	seqs, err := g.s.CommitSendMany(ctx, id, []byte("hello all"), []store.PeerUpdate{{Peer: bob, Update: update}, {Peer: carol, Update: update}})
	require.NoError(t, err)
	ok, err := g.s.CommitAck(ctx, k.r, k.id, store.Inbound{Update: update})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = g.s.AbandonPendingMessage(ctx, store.PendingMessage{Sequence: seqs[1], Recipient: carol, ID: id})
	require.NoError(t, err)
	require.True(t, ok)
	n, err := g.s.PendingMessageCount(ctx, nil)
	require.NoError(t, err, "the store's own writes need no SELECT count(*)")
	require.EqualValues(t, 1, n)

	g.externalInsert(pendingKey{carol, g.newID()})
	_, err = g.s.PendingMessageCount(ctx, nil)
	require.ErrorIs(t, err, errInjected, "another connection wrote: SELECT count(*) runs")
	require.Equal(t, 1, g.inj.reset(), "the armed fault fired once, there")
	delete(g.pending, k)
	g.pending[pendingKey{bob, id}] = seqs[0]
	g.check("after the external insert")
}

// TestCountWithMoreConnectionsAsksSQLite: the in-memory count is trusted
// only while the store's pool opens one connection at a time; if
// something raises the limit on the store's handle, every count runs
// SELECT count(*) (a fault armed on it fires) and stays right.
func TestCountWithMoreConnectionsAsksSQLite(t *testing.T) {
	g := newCountRig(t)
	k := pendingKey{bob, g.newID()}
	seq, err := g.s.InsertPending(g.ctx, k.r, k.id, []byte("hello"))
	require.NoError(t, err)
	g.pending[k] = seq
	g.check("established")

	sqliteaccess.DB(g.s).SetMaxOpenConns(2)
	g.inj.fail(fault{Op: opStmt, Match: sqlCountAll})
	_, err = g.s.PendingMessageCount(g.ctx, nil)
	require.ErrorIs(t, err, errInjected, "with two connections allowed, SELECT count(*) runs")
	require.Equal(t, 1, g.inj.reset(), "the armed fault fired once, there")
	g.externalInsert(pendingKey{carol, g.newID()})
	g.check("with two connections allowed")
}

// TestCountAfterCommitOfUnknownOutcome: a write whose COMMIT reports an
// error may still have reached the disk (an I/O error after the WAL frame
// was written). The store cannot tell, so the next count of all pending
// messages asks SQLite: it equals SELECT count(*) whether the change
// stayed, as here, or not. Each kind of pending write is failed so: a
// transaction (send, fan-out, ACK, abandon of a row) and a single
// statement (abandon by recipient and id).
func TestCountAfterCommitOfUnknownOutcome(t *testing.T) {
	update := store.PeerState{Session: countSession}
	for _, tc := range []struct {
		name string
		// do runs the write, which fails with the injected error after
		// committing, and records in the model what it changed.
		do func(g *countRig, seeded pendingKey) error
	}{
		{"insert", func(g *countRig, _ pendingKey) error {
			k := pendingKey{carol, g.newID()}
			g.pending[k] = 0
			_, err := g.s.InsertPending(g.ctx, k.r, k.id, []byte("hello"))
			return err
		}},
		{"send with its session", func(g *countRig, _ pendingKey) error {
			k := pendingKey{carol, g.newID()}
			g.pending[k] = 0
			_, err := g.s.CommitSend(g.ctx, k.r, k.id, []byte("hello"), update)
			return err
		}},
		{"fan-out send", func(g *countRig, _ pendingKey) error {
			id := g.newID()
			var peers []store.PeerUpdate
			for _, r := range countRecipients {
				g.pending[pendingKey{r, id}] = 0
				peers = append(peers, store.PeerUpdate{Peer: r, Update: update})
			}
			_, err := g.s.CommitSendMany(g.ctx, id, []byte("hello all"), peers)
			return err
		}},
		{"ACK", func(g *countRig, k pendingKey) error {
			delete(g.pending, k)
			_, err := g.s.CommitAck(g.ctx, k.r, k.id, store.Inbound{Update: update})
			return err
		}},
		{"abandon (one statement)", func(g *countRig, k pendingKey) error {
			delete(g.pending, k)
			_, err := g.s.AbandonPending(g.ctx, k.r, k.id)
			return err
		}},
		{"abandon of a row (a transaction)", func(g *countRig, k pendingKey) error {
			seq := g.pending[k]
			delete(g.pending, k)
			_, err := g.s.AbandonPendingMessage(g.ctx, store.PendingMessage{Sequence: seq, Recipient: k.r, ID: k.id})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newCountRig(t)
			var seeded pendingKey
			for _, r := range []store.DeviceAddress{bob, bob, carol} {
				seeded = pendingKey{r, g.newID()}
				seq, err := g.s.InsertPending(g.ctx, seeded.r, seeded.id, []byte("seed"))
				require.NoError(t, err)
				g.pending[seeded] = seq
			}
			g.check("seeded") // the count is now held in memory
			match := sqlInsertPending
			if strings.HasPrefix(tc.name, "ACK") || strings.HasPrefix(tc.name, "abandon") {
				match = sqlDeletePending
			}
			g.inj.fail(fault{Op: opCommitLost, Match: match})
			require.ErrorIs(t, tc.do(g, seeded), errInjected)
			require.Equal(t, 1, g.inj.reset(), "the fault fired")
			g.check("after a failed commit whose change stayed")
		})
	}
}

// sqlCountInbound is the store's SELECT count(*) of all pending inbound
// messages.
const sqlCountInbound = "-- name: CountPendingInbound :one"

// TestInboundCountServedFromMemory: the count of all pending inbound
// messages follows the store's own receives and removals without running
// SELECT count(*) (a fault armed on it never fires), runs it again as
// soon as another connection has written, and after a restart.
func TestInboundCountServedFromMemory(t *testing.T) {
	g := newCountRig(t)
	ctx := g.ctx
	in := store.Inbound{Update: store.PeerState{Session: countSession}}
	count := func() (int64, error) { return g.s.PendingInboundCount(ctx, nil) }
	var seqs []int64
	for range 3 {
		got, err := g.s.CommitReceived(ctx, bob, g.newID(), []byte("hello"), in)
		require.NoError(t, err)
		require.Equal(t, store.ReceivedNew, got.Status)
		seqs = append(seqs, got.Sequence)
	}
	n, err := count()
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "established")

	g.inj.fail(fault{Op: opStmt, Match: sqlCountInbound})
	id := g.newID()
	got, err := g.s.CommitReceived(ctx, carol, id, []byte("hello"), in)
	require.NoError(t, err)
	again, err := g.s.CommitReceived(ctx, carol, id, []byte("hello"), in)
	require.NoError(t, err)
	require.Equal(t, store.Received{Status: store.ReceivedPending, Sequence: got.Sequence}, again, "a copy adds no row")
	_, ok, err := g.s.RemovePendingInbound(ctx, seqs[0])
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = g.s.RemovePendingInbound(ctx, seqs[0])
	require.NoError(t, err)
	require.False(t, ok)
	n, err = count()
	require.NoError(t, err, "the store's own writes need no SELECT count(*)")
	require.EqualValues(t, 3, n)
	out, err := g.s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, out, "the outbound count is apart")

	_, err = g.other.ExecContext(ctx, "DELETE FROM pending_inbound_message WHERE sequence = ?", seqs[1])
	require.NoError(t, err)
	_, err = count()
	require.ErrorIs(t, err, errInjected, "another connection wrote: SELECT count(*) runs")
	require.Equal(t, 1, g.inj.reset(), "the armed fault fired once, there")
	n, err = count()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	g.reopen()
	n, err = count()
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "after a restart")
}
