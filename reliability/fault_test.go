package reliability_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// SQL fragments the faults match (the statements of queries/*.sql).
const (
	sqlDeletePending  = "DELETE FROM pending_outbound_message"
	sqlInsertPending  = "INSERT INTO pending_outbound_message"
	sqlInsertSession  = "INSERT INTO session ("
	sqlInsertInbound  = "INSERT INTO processed_inbound_message"
	sqlPagePending    = "name: PagePendingOutbound :many"
	sqlPageRecipient  = "name: PagePendingOutboundForRecipient :many"
	sqlCountVersion   = "name: PendingOutboundDataVersion :one"
	sqlNextForRetry   = "name: NextPendingOutboundForRecipient :one"
	sqlUpsertIdentity = "local_identity"
)

// faultSetup is alice (sender) on a SQLite file behind the fault driver,
// and bob and carol (recipients) in memory, sharing one network.
type faultSetup struct {
	net         *transporttest.Network
	inj         *injector
	a           *device
	b, c        *device
	driverName  string
	ctx         context.Context
	sentToBob   []store.LogicalMessageID
	sentToCarol []store.LogicalMessageID
	bodiesByID  map[store.LogicalMessageID][]byte
}

func newFaultSetup(t *testing.T) *faultSetup {
	t.Helper()
	f := &faultSetup{net: transporttest.NewNetwork(), inj: &injector{}, ctx: context.Background(), bodiesByID: map[store.LogicalMessageID][]byte{}}
	f.driverName = registerFaultDriver(t, f.inj)
	f.a = sqliteDevice(t, f.net, alice, f.driverName)
	f.b = memDevice(t, f.net, bob)
	f.c = memDevice(t, f.net, carol)
	// Sessions in both directions, and no initiation left: a later ACK
	// changes nothing but the session and the pending row.
	_, err := f.a.c.Send(f.ctx, bob, []byte("warm-up"))
	require.NoError(t, err)
	_, err = f.a.c.Send(f.ctx, carol, []byte("warm-up"))
	require.NoError(t, err)
	exchange(t, f.net, f.b, f.c, f.a)
	n, err := f.a.c.PendingMessageCount(f.ctx, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	return f
}

// send sends n messages to each of bob and carol, which do not poll.
func (f *faultSetup) send(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		for _, to := range []store.DeviceAddress{bob, carol} {
			body := bytes.Repeat([]byte{byte(i), byte(to.DeviceID)}, 100+i)
			id, err := f.a.c.Send(f.ctx, to, body)
			require.NoError(t, err)
			f.bodiesByID[id] = body
			if to == bob {
				f.sentToBob = append(f.sentToBob, id)
			} else {
				f.sentToCarol = append(f.sentToCarol, id)
			}
		}
	}
}

// requireFault checks that err is the injected fault, wrapped with the
// given context, and that exactly one fault fired.
func (f *faultSetup) requireFault(t *testing.T, err error, contexts ...string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, errInjected)
	for _, c := range contexts {
		require.Contains(t, err.Error(), c)
	}
	require.Equal(t, 1, f.inj.reset(), "exactly one fault fired")
}

// requireUnchanged checks that the database is exactly as dumped before,
// and that every message is still pending with its plaintext.
func (f *faultSetup) requireUnchanged(t *testing.T, before map[string][]string) {
	t.Helper()
	require.Equal(t, before, dump(t, sqliteaccess.DB(f.a.sql)), "the failed call left something behind")
	got := allPending(t, f.a.c, nil, 7)
	for _, m := range got {
		require.Equal(t, f.bodiesByID[m.ID], m.Plaintext, "plaintext of %s", m.ID)
	}
}

func TestFaultAbandonRollsBack(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 3)
	target := f.sentToBob[1]
	for _, fl := range []fault{
		{Op: opStmt, Match: sqlDeletePending},
		{Op: opCommit, Match: sqlDeletePending},
	} {
		t.Run(fl.Op, func(t *testing.T) {
			before := dump(t, sqliteaccess.DB(f.a.sql))
			f.inj.fail(fl)
			st, err := f.a.c.AbandonPending(f.ctx, bob, target)
			f.requireFault(t, err, "client: abandon", "store: abandon pending")
			require.Zero(t, st)
			f.requireUnchanged(t, before)
			n, err := f.a.c.PendingMessageCount(f.ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 6, n)
		})
	}
	st, err := f.a.c.AbandonPending(f.ctx, bob, target)
	require.NoError(t, err)
	require.Equal(t, client.Abandoned, st)
	st, err = f.a.c.AbandonPending(f.ctx, bob, target)
	require.NoError(t, err)
	require.Equal(t, client.NotPending, st)
}

func TestFaultAckRollsBack(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 2)
	// Bob receives and finalizes, which ACKs; the ACKs wait in alice's
	// mailbox.
	polled, err := f.b.c.Poll(f.ctx)
	require.NoError(t, err)
	finalizeAll(t, f.b.c, polled)
	acks, err := f.net.Receive(f.ctx, alice)
	require.NoError(t, err)
	require.Len(t, acks, 2)
	ack := acks[0]

	for _, fl := range []fault{
		{Op: opStmt, Match: sqlInsertSession},
		{Op: opStmt, Match: sqlDeletePending},
		{Op: opCommit, Match: sqlDeletePending},
	} {
		t.Run(fl.Op+" "+fl.Match, func(t *testing.T) {
			before := dump(t, sqliteaccess.DB(f.a.sql))
			f.inj.fail(fl)
			res, err := f.a.c.Receive(f.ctx, ack)
			f.requireFault(t, err, "client: receive ack: store: commit ack from bob/1")
			require.Nil(t, res)
			f.requireUnchanged(t, before)
		})
	}
	// The same envelope now goes through: nothing of the failed attempts
	// was kept (a kept session would reject it as a replay).
	res, err := f.a.c.Receive(f.ctx, ack)
	require.NoError(t, err)
	require.Equal(t, &client.Acknowledgement{From: bob, ID: f.sentToBob[0], Cleared: true}, res)
	_, err = f.a.c.Receive(f.ctx, ack)
	require.ErrorIs(t, err, session.ErrReplay)
	pend := allPending(t, f.a.c, &bob, 100)
	require.Len(t, pend, 1)
	require.Equal(t, f.sentToBob[1], pend[0].ID)
}

func TestFaultSendRollsBack(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 2)
	for _, fl := range []fault{
		{Op: opStmt, Match: sqlInsertPending},
		{Op: opCommit, Match: sqlInsertPending},
	} {
		t.Run(fl.Op, func(t *testing.T) {
			before := dump(t, sqliteaccess.DB(f.a.sql))
			f.net.ResetCalls()
			f.inj.fail(fl)
			id, err := f.a.c.Send(f.ctx, bob, []byte("never stored"))
			f.requireFault(t, err, "client: send")
			require.NotErrorIs(t, err, client.ErrMessageNotSent, "nothing was stored")
			require.Zero(t, id, "no id for a message not stored")
			f.requireUnchanged(t, before)
			require.Empty(t, f.net.Calls(), "nothing handed off")
		})
	}

	// The pending row and the session that encrypted it commit in one
	// transaction: when the session write fails, the row is rolled back
	// too, nothing leaves, and the next send (from the stored session)
	// still reaches bob.
	before := dump(t, sqliteaccess.DB(f.a.sql))
	f.net.ResetCalls()
	f.inj.fail(fault{Op: opStmt, Match: sqlInsertSession})
	_, err := f.a.c.Send(f.ctx, bob, []byte("not stored"))
	f.requireFault(t, err, "client: send")
	require.NotErrorIs(t, err, client.ErrMessageNotSent)
	f.requireUnchanged(t, before)
	require.Empty(t, f.net.Calls(), "nothing handed off")

	id, err := f.a.c.Send(f.ctx, bob, []byte("stored and sent"))
	require.NoError(t, err)
	sent, err := f.a.c.RetryPendingMessages(f.ctx, bob)
	require.NoError(t, err)
	require.Equal(t, append(append([]store.LogicalMessageID{}, f.sentToBob...), id), sent)
	res, err := f.b.c.Poll(f.ctx)
	require.NoError(t, err, "bob decrypts everything: no ratchet state was lost or reused")
	var got []string
	for _, r := range res {
		if m, ok := r.(*client.Message); ok {
			got = append(got, string(m.Plaintext))
		}
	}
	require.Contains(t, got, "stored and sent")
	require.NotContains(t, got, "not stored")
	require.NotContains(t, got, "never stored")
	finalizeAll(t, f.b.c, res)
	exchange(t, f.net, f.a)
	n, err := f.a.c.PendingMessageCount(f.ctx, &bob)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestFaultReadsFailCleanly(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 4)
	before := dump(t, sqliteaccess.DB(f.a.sql))

	f.inj.fail(fault{Op: opStmt, Match: sqlPagePending})
	p, err := f.a.c.PendingMessages(f.ctx, store.PageRequest{Limit: 5})
	f.requireFault(t, err, "client: pending messages", "store: page pending")
	require.Empty(t, p.Messages)
	require.Nil(t, p.NextAfterSequence)

	// A failure after some rows were read returns no partial page.
	for _, m := range []string{sqlPagePending, sqlPageRecipient} {
		f.inj.fail(fault{Op: opNext, Match: m, AfterRows: 2})
		p, err = f.a.c.PendingMessages(f.ctx, store.PageRequest{Limit: 5, Recipient: func() *store.DeviceAddress {
			if m == sqlPageRecipient {
				return &carol
			}
			return nil
		}()})
		f.requireFault(t, err, "client: pending messages")
		require.Empty(t, p.Messages, "no partial page")
		require.Nil(t, p.NextAfterSequence)
	}

	// Every count of all pending messages reads data_version (the
	// in-memory count may serve it without SELECT count(*): the failed
	// pages above kept their connection).
	f.inj.fail(fault{Op: opStmt, Match: sqlCountVersion})
	n, err := f.a.c.PendingMessageCount(f.ctx, nil)
	f.requireFault(t, err, "client: pending message count", "store: count pending")
	require.Zero(t, n)

	f.net.ResetCalls()
	f.inj.fail(fault{Op: opStmt, Match: sqlNextForRetry, Skip: 1})
	sent, err := f.a.c.RetryPendingMessages(f.ctx, bob)
	f.requireFault(t, err, "client: retry bob/1", "store: next pending")
	require.Equal(t, f.sentToBob[:1], sent, "retry stops at the failure, reporting what it sent")

	// Reads changed nothing but the session the retry advanced.
	after := dump(t, sqliteaccess.DB(f.a.sql))
	delete(before, "session")
	delete(after, "session")
	require.Equal(t, before, after)
	require.Len(t, allPending(t, f.a.c, nil, 3), 8)
}

// TestFaultFullDisk sends into a database limited to its current size:
// Send fails with SQLITE_FULL wrapped with context, and every message
// already pending is untouched. Once space is back, sending works again.
func TestFaultFullDisk(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 10)
	db := sqliteaccess.DB(f.a.sql)
	var pages, free int64
	require.NoError(t, db.QueryRowContext(f.ctx, "PRAGMA page_count").Scan(&pages))
	require.NoError(t, db.QueryRowContext(f.ctx, "PRAGMA freelist_count").Scan(&free))
	before := dump(t, db)
	pendBefore := allPending(t, f.a.c, nil, 100)

	f.inj.maxPages.Store(pages)
	f.net.ResetCalls()
	// Far more than the free pages can hold: it needs new pages.
	big := bytes.Repeat([]byte("x"), int(free+4)*4096)
	_, err := f.a.c.Send(f.ctx, bob, big)
	require.Error(t, err)
	require.True(t, sqlitedriver.IsFull(err), "error %v", err)
	require.Contains(t, err.Error(), "client: send: store:")
	require.NotErrorIs(t, err, client.ErrMessageNotSent, "nothing was stored")
	require.Empty(t, f.net.Calls(), "nothing handed off")

	// Abandon and page still work on a full disk.
	require.Equal(t, before, dump(t, db))
	require.Equal(t, pendBefore, allPending(t, f.a.c, nil, 100))
	n, err := f.a.c.PendingMessageCount(f.ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, len(pendBefore), n)

	f.inj.maxPages.Store(0)
	id, err := f.a.c.Send(f.ctx, bob, big)
	require.NoError(t, err)
	after := allPending(t, f.a.c, nil, 100)
	require.Equal(t, pendBefore, after[:len(after)-1])
	require.Equal(t, id, after[len(after)-1].ID)
	require.Equal(t, big, after[len(after)-1].Plaintext)
	var res string
	require.NoError(t, db.QueryRowContext(f.ctx, "PRAGMA integrity_check").Scan(&res))
	require.Equal(t, "ok", res)
}

// TestFaultReceiveCommitKeepsPrekey: answering an initiation removes the
// consumed one-time prekey in the same commit as the session. Were the
// prekeys stored first, a failed commit (or a crash between the two)
// would leave the recipient unable ever to answer the sender's initiation
// (ErrUnknownPrekey on every retry).
func TestFaultReceiveCommitKeepsPrekey(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "same process"
		if restart {
			name = "after restart"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			inj := &injector{}
			drv := registerFaultDriver(t, inj)
			a := memDevice(t, net, alice)
			b := sqliteDevice(t, net, bob, drv)
			id, err := a.c.Send(ctx, bob, []byte("first"))
			require.NoError(t, err)
			envs, err := net.Receive(ctx, bob)
			require.NoError(t, err)
			require.Len(t, envs, 1)

			before := dump(t, sqliteaccess.DB(b.sql))
			inj.fail(fault{Op: opStmt, Match: sqlInsertInbound})
			_, err = b.c.Receive(ctx, envs[0])
			require.ErrorIs(t, err, errInjected)
			require.Equal(t, 1, inj.reset())
			// Nothing is stored: no pin, no session, no processed id, and
			// the prekeys still hold the one-time prekey (they commit in
			// one transaction with the message).
			after := dump(t, sqliteaccess.DB(b.sql))
			require.Empty(t, after["identity_pin"])
			require.Equal(t, before, after, "a failed receive stores nothing, prekeys included")
			if restart {
				b.reopen(t, net, drv)
			}
			res, err := b.c.Receive(ctx, envs[0])
			require.NoError(t, err)
			m, ok := res.(*client.Message)
			require.True(t, ok, "got %T", res)
			require.Equal(t, id, m.ID)
			finalizeAll(t, b.c, []client.ReceiveResult{res})
			exchange(t, net, a)
			n, err := a.c.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}
}

// Errors reaching the caller must identify the failing layer: the store's
// sentinel-free I/O errors still unwrap to the driver's error.
func TestFaultErrorsUnwrapToDriver(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 1)
	f.inj.fail(fault{Op: opStmt, Match: sqlDeletePending})
	_, err := f.a.c.AbandonPending(f.ctx, bob, f.sentToBob[0])
	f.requireFault(t, err)
	require.False(t, errors.Is(err, store.ErrInvalidArgument))
	require.False(t, errors.Is(err, client.ErrNotInitialized))
}
