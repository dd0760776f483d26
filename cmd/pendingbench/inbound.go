package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/benchpeers"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
)

// inboundSenders is how many senders the seeded pending inbound rows
// come from, besides fewSender.
const inboundSenders = 1000

// fewSender holds 10 of the seeded pending inbound rows, spread over the
// whole sequence: the one-sender page a user meets for a contact.
var fewSender = store.DeviceAddress{UserID: "bench-sender-few", DeviceID: 1}

// inboundRow is the sender and logical id of seeded pending inbound row i
// (sequence i+1).
func inboundRow(n, i int) (store.DeviceAddress, store.LogicalMessageID) {
	var id store.LogicalMessageID
	copy(id[:], fmt.Sprintf("in-%013d", i))
	if i%(n/10) == n/20 {
		return fewSender, id
	}
	return store.DeviceAddress{UserID: fmt.Sprintf("bench-sender-%04d", i%inboundSenders), DeviceID: 1}, id
}

// seedInbound puts e.n pending inbound rows in e's file, each with its
// processed id as a receive stores them (sealed as the store seals them,
// through the generated INSERTs, in batches), then
// reopens the store, so that its in-memory counts are taken from the
// file.
func seedInbound(ctx context.Context, e *env) error {
	conn := e.rawDB()
	const batch = 5000
	for lo := 0; lo < e.n; lo += batch {
		err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
			q := db.New(tx)
			for i := lo; i < min(lo+batch, e.n); i++ {
				from, id := inboundRow(e.n, i)
				sealed, err := storeimpl.SealInbound(e.keys, from, id, benchseed.Plaintext(i, benchseed.DefaultPlaintextSize))
				if err != nil {
					return err
				}
				if _, err := q.InsertProcessedInbound(ctx, db.InsertProcessedInboundParams{SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], ProcessedAt: time.Now().Unix()}); err != nil {
					return err
				}
				seq, err := q.InsertPendingInbound(ctx, db.InsertPendingInboundParams{SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], Sealed: sealed})
				if err != nil {
					return err
				}
				if seq != int64(i)+1 {
					return fmt.Errorf("%s: inbound row %d got sequence %d", e.name, i, seq)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seed inbound %s: %w", e.name, err)
		}
	}
	return e.open(ctx)
}

// inboundLines measure the receiving side with as many messages pending
// inbound as the databases hold pending outbound (1k and 1M): counts,
// pages against the same query raw, the removal a finalize commits
// against the raw DELETE, and client receive and finalize at both sizes
// and against the raw insert.
func inboundLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	for _, e := range []*env{b.small, b.large} {
		t0 := time.Now()
		if err := seedInbound(ctx, e); err != nil {
			return nil, err
		}
		b.logf("seeded %s: %d pending inbound in %s", e.name, e.n, time.Since(t0).Round(time.Millisecond))
	}
	// The count each database holds: every line below puts back what it
	// removes and removes what it adds.
	held := map[*env]int{b.small: b.small.n, b.large: b.large.n}
	countIn := func(e *env) func(int) error {
		return func(int) error {
			n, err := e.s.PendingInboundCount(ctx, nil)
			if err == nil && n != int64(held[e]) {
				err = fmt.Errorf("%s: inbound count %d, want %d", e.name, n, held[e])
			}
			return err
		}
	}
	for _, e := range []*env{b.small, b.large} { // the first count after Open runs SELECT count(*)
		if err := countIn(e)(0); err != nil {
			return nil, err
		}
	}
	a, c, err := interleave(o.Iters, countIn(b.large), countIn(b.small))
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("inbound count, all senders: %s / %s pending inbound (warm)", b.L, b.S), a, c, 2,
		", in-memory count checked against PRAGMA data_version")}

	// Pages at random cursors over the whole inbound sequence, and the
	// few-message sender's page, against the same query on the store's
	// connection with the same opens.
	e := b.large
	q := db.New(e.rawDB())
	cursors := make([]int64, o.Iters)
	for i := range cursors {
		cursors[i] = int64(b.rng.IntN(e.n - store.MaxPageSize - 1))
	}
	lib := func(round int) error {
		p, err := e.s.PendingInbound(ctx, store.InboundPageRequest{After: &cursors[round], Limit: store.MaxPageSize})
		if err == nil && len(p.Messages) != store.MaxPageSize {
			err = fmt.Errorf("inbound page: %d messages", len(p.Messages))
		}
		return err
	}
	raw := func(round int) error {
		rows, err := q.PagePendingInbound(ctx, db.PagePendingInboundParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: cursors[round] + 1, RowLimit: store.MaxPageSize + 1})
		if err != nil {
			return err
		}
		return openInboundRows(e, rows[:min(len(rows), store.MaxPageSize)])
	}
	a, c, err = interleave(o.Iters, lib, raw)
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("inbound page of 100 at a random cursor / raw floor at %s", b.L), a, c, 1.2,
		", store PendingInbound; the floor: the same query on the store's connection, 100 Keyring.Open"))
	libFew := func(int) error {
		p, err := e.s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize, Sender: &fewSender})
		if err == nil && len(p.Messages) != 10 {
			err = fmt.Errorf("sender page: %d messages", len(p.Messages))
		}
		return err
	}
	rawFew := func(int) error {
		rows, err := q.PagePendingInboundForSender(ctx, db.PagePendingInboundForSenderParams{SealedLimit: storeimpl.MaxSealedMessageSize,
			SenderUserID: fewSender.UserID, SenderDeviceID: fewSender.DeviceID, FromSequence: math.MinInt64, RowLimit: store.MaxPageSize + 1})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := openInbound(e, r.SenderUserID, r.SenderDeviceID, r.LogicalID, r.Sealed); err != nil {
				return err
			}
		}
		return nil
	}
	a, c, err = interleave(o.Iters, libFew, rawFew)
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("inbound page of a sender with 10 messages / raw floor at %s", b.L), a, c, 1.3,
		", store PendingInbound with Sender; the floor: the same query, the same opens"))

	r, err := removeFloorLine(b)
	if err != nil {
		return nil, err
	}
	rs = append(rs, r)
	more, err := receiveLines(b)
	if err != nil {
		return nil, err
	}
	rs = append(rs, more...)
	for _, e := range []*env{b.small, b.large} {
		if err := countIn(e)(0); err != nil {
			return nil, fmt.Errorf("after the inbound lines: %w", err)
		}
	}
	return rs, nil
}

// openInbound opens one pending inbound value as the store does.
func openInbound(e *env, user, device, lid, sealed any) error {
	u, _ := user.(string)
	d, _ := device.(int64)
	l, _ := lid.([]byte)
	s, _ := sealed.([]byte)
	id, err := store.ParseLogicalMessageID(l)
	if err != nil {
		return err
	}
	_, err = storeimpl.OpenInbound(e.keys, store.DeviceAddress{UserID: u, DeviceID: d}, id, s)
	return err
}

func openInboundRows(e *env, rows []db.PagePendingInboundRow) error {
	for _, r := range rows {
		if err := openInbound(e, r.SenderUserID, r.SenderDeviceID, r.LogicalID, r.Sealed); err != nil {
			return err
		}
	}
	return nil
}

// removeFloorLine times the removal a finalize or discard commits (store
// RemovePendingInbound: one DELETE that checks the row's processed id)
// against the raw DELETE of the same generated query on the
// store's connection (a statement SQLite commits on its own), each on a
// different random seeded row of the large database, put back untimed.
func removeFloorLine(b *bench) (result, error) {
	ctx, e := b.ctx, b.large
	q := db.New(e.rawDB())
	used := map[int]bool{}
	take := func() int {
		for {
			if i := b.rng.IntN(e.n); !used[i] {
				used[i] = true
				return i
			}
		}
	}
	putBack := func(i int) error {
		from, _ := inboundRow(e.n, i)
		id := benchseed.ReplacementID()
		_, err := e.s.CommitReceived(ctx, from, id, benchseed.Plaintext(i, benchseed.DefaultPlaintextSize), store.Inbound{Update: store.PeerState{Session: ackSession}})
		return err
	}
	lib := func(int) (time.Duration, error) {
		i := take()
		d, err := timed(func() error {
			_, ok, err := e.s.RemovePendingInbound(ctx, int64(i)+1)
			if err == nil && !ok {
				err = fmt.Errorf("inbound row %d was not pending", i)
			}
			return err
		})
		if err != nil {
			return 0, err
		}
		return d, putBack(i)
	}
	raw := func(int) (time.Duration, error) {
		i := take()
		var rows []db.DeletePendingInboundRow
		d, err := timed(func() error {
			var err error
			rows, err = q.DeletePendingInbound(ctx, int64(i)+1)
			return err
		})
		if err != nil || len(rows) != 1 {
			return 0, fmt.Errorf("raw delete of inbound row %d: %d rows, %v", i, len(rows), err)
		}
		// Back through the same connection, so that the store's in-memory
		// count, which does not see this connection's writes, stays right.
		from, id := inboundRow(e.n, i)
		sealed, err := storeimpl.SealInbound(e.keys, from, id, benchseed.Plaintext(i, benchseed.DefaultPlaintextSize))
		if err != nil {
			return 0, err
		}
		_, err = q.InsertPendingInbound(ctx, db.InsertPendingInboundParams{SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], Sealed: sealed})
		return d, err
	}
	a, f, err := alternate(min(b.o.DMLIters, e.n/4), nil, lib, raw)
	if err != nil {
		return result{}, fmt.Errorf("inbound removal floor: %w", err)
	}
	return ratioLE(fmt.Sprintf("finalize's removal (store RemovePendingInbound) / raw DELETE at %s", b.L), a, f, 1.1,
		", random rows over the whole table, put back untimed; the removal's one statement also checks the row's processed id"), nil
}

// receiveRig is a bench peer that sends to e's client, which receives.
type receiveRig struct {
	e     *env
	c     *client.Client
	peers *benchpeers.Peers
	n     int
}

func newReceiveRig(ctx context.Context, e *env, user string) (*receiveRig, error) {
	c, err := e.theClient(ctx)
	if err != nil {
		return nil, err
	}
	peers, err := benchpeers.Establish(ctx, c, e.net, user, 1)
	if err != nil {
		return nil, err
	}
	if _, err := e.net.Receive(ctx, self); err != nil {
		return nil, err
	}
	return &receiveRig{e: e, c: c, peers: peers}, nil
}

// envelope has the peer send one message to self and returns its
// envelope, untimed.
func (r *receiveRig) envelope(ctx context.Context) ([]byte, error) {
	if r.n++; r.n%50 == 0 {
		if err := r.peers.Drain(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := r.peers.Clients[0].Send(ctx, self, sendPlaintext); err != nil {
		return nil, err
	}
	envs, err := r.e.net.Receive(ctx, self)
	if err != nil {
		return nil, err
	}
	if len(envs) != 1 {
		return nil, fmt.Errorf("%d envelopes for self, want 1", len(envs))
	}
	return envs[0], nil
}

// receive receives env (timed by the caller) and returns its sequence.
func (r *receiveRig) receive(ctx context.Context, env []byte) (int64, error) {
	res, err := r.c.Receive(ctx, env)
	if err != nil {
		return 0, err
	}
	m, ok := res.(*client.Message)
	if !ok || m.Again {
		return 0, fmt.Errorf("receive: %T, want a new message", res)
	}
	return m.Sequence, nil
}

// receiveLines time client.Client.Receive of a real envelope (decrypt,
// seal, one transaction: processed id, pending inbound row, session) and
// FinalizeInbound (the removal, then the ACK: encrypt, session, hand-off)
// at the large and the small size, and Receive against the raw insert of
// the same sealed bytes (processed id and row, one transaction) on the
// large store's connection.
func receiveLines(b *bench) ([]result, error) {
	ctx := b.ctx
	rl, err := newReceiveRig(ctx, b.large, "bench-inbound-large")
	if err != nil {
		return nil, err
	}
	rsm, err := newReceiveRig(ctx, b.small, "bench-inbound-small")
	if err != nil {
		return nil, err
	}
	recv := func(r *receiveRig) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			env, err := r.envelope(ctx)
			if err != nil {
				return 0, err
			}
			var seq int64
			d, err := timed(func() error { seq, err = r.receive(ctx, env); return err })
			if err != nil {
				return 0, err
			}
			_, err = r.c.FinalizeInbound(ctx, seq) // untimed: the table keeps its size
			return d, err
		}
	}
	fin := func(r *receiveRig) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			env, err := r.envelope(ctx)
			if err != nil {
				return 0, err
			}
			seq, err := r.receive(ctx, env)
			if err != nil {
				return 0, err
			}
			var out client.InboundOutcome
			d, err := timed(func() error { out, err = r.c.FinalizeInbound(ctx, seq); return err })
			if err == nil && (out.Status != client.Finalized || !out.AckSent) {
				err = fmt.Errorf("finalize: %v", out)
			}
			return d, err
		}
	}
	var rs []result
	sl, ss, err := alternate(b.o.DMLIters, nil, recv(rl), recv(rsm))
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	rs = append(rs, ratioLE(fmt.Sprintf("receive (client.Receive): %s / %s pending inbound", b.L, b.S), sl, ss, 1.3,
		fmt.Sprintf(", %.0f msg/s at %s; decrypt + seal + one tx (processed id, pending inbound row, session)", 1/sl.median().Seconds(), b.L)))
	fl, fs, err := alternate(b.o.DMLIters, nil, fin(rl), fin(rsm))
	if err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	rs = append(rs, ratioLE(fmt.Sprintf("finalize (client.FinalizeInbound): %s / %s pending inbound", b.L, b.S), fl, fs, 1.3,
		", the removal's tx, then the ACK: encrypt + session tx + hand-off"))

	// Receive against the floor of what it stores: BEGIN IMMEDIATE; the
	// processed id; the sealed row; COMMIT, through the generated
	// queries and the one transaction helper on the store's connection.
	// The raw row is deleted again, untimed, through the same connection.
	from := rl.peers.Addrs[0]
	rawRecv := func(int) (time.Duration, error) {
		id := store.NewLogicalMessageID()
		sealed, err := storeimpl.SealInbound(b.large.keys, from, id, sendPlaintext)
		if err != nil {
			return 0, err
		}
		var seq int64
		d, err := timed(func() error {
			return sqltx.Run(ctx, b.large.rawDB(), func(tx *sql.Tx) error {
				q := db.New(tx)
				if _, err := q.InsertProcessedInbound(ctx, db.InsertProcessedInboundParams{SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], ProcessedAt: time.Now().Unix()}); err != nil {
					return err
				}
				var err error
				seq, err = q.InsertPendingInbound(ctx, db.InsertPendingInboundParams{SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], Sealed: sealed})
				return err
			})
		})
		if err != nil {
			return 0, err
		}
		_, err = db.New(b.large.rawDB()).DeletePendingInbound(ctx, seq)
		return d, err
	}
	raws, recvs, err := alternate(b.o.DMLIters, nil, rawRecv, recv(rl))
	if err != nil {
		return nil, fmt.Errorf("receive floor: %w", err)
	}
	rs = append(rs, ratioGE(fmt.Sprintf("receive throughput / raw insert throughput at %s (raw time / receive time)", b.L), raws, recvs, 0.5,
		" (raw vs receive); receive = decrypt + seal + one tx (processed id, row, session); the floor: the processed id and the sealed row in one tx"))
	return rs, nil
}
