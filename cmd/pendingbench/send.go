package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/benchpeers"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
)

// sendRig is a client over a seeded store and a device (in memory) it
// holds a session with, both ways (benchpeers).
type sendRig struct {
	a     *client.Client
	peers *benchpeers.Peers
	peer  store.DeviceAddress
	n     int // sends since the mailbox was drained
}

// newSendRig establishes a session between e's client and device 1 of a
// new user.
func newSendRig(ctx context.Context, e *env, user string) (*sendRig, error) {
	a, err := e.theClient(ctx)
	if err != nil {
		return nil, err
	}
	peers, err := benchpeers.Establish(ctx, a, e.net, user, 1)
	if err != nil {
		return nil, err
	}
	return &sendRig{a: a, peers: peers, peer: peers.Addrs[0]}, nil
}

// drain empties the device's mailbox and the network's call log every 50
// sends (untimed), so that the in-process network stays small.
func (r *sendRig) drain(ctx context.Context) error {
	if r.n++; r.n%50 != 0 {
		return nil
	}
	return r.peers.Drain(ctx)
}

var sendPlaintext = benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)

func (r *sendRig) send(ctx context.Context) error {
	_, err := r.a.Send(ctx, r.peer, sendPlaintext)
	return err
}

// sendLines time client.Client.Send at the large and the small size, and
// against a raw insert of the same sealed bytes in its own transaction on
// the large store's connection.
func sendLines(b *bench) ([]result, error) {
	ctx := b.ctx
	rl, err := newSendRig(ctx, b.large, "bench-peer-large")
	if err != nil {
		return nil, err
	}
	rsm, err := newSendRig(ctx, b.small, "bench-peer-small")
	if err != nil {
		return nil, err
	}
	sl, ss, err := interleaveWith(b.o.DMLIters, func(int) error { return errors.Join(rl.drain(ctx), rsm.drain(ctx)) },
		func(int) error { return rl.send(ctx) }, func(int) error { return rsm.send(ctx) })
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("send (client.Send): %s / %s pending", b.L, b.S), sl, ss, 1.3,
		fmt.Sprintf(", %.0f msg/s at %s", 1/sl.median().Seconds(), b.L))}

	sealed, err := benchseed.SealRow(b.large.keys, rl.peer, store.NewLogicalMessageID(), sendPlaintext)
	if err != nil {
		return nil, err
	}
	sends, raws, err := interleaveWith(b.o.DMLIters, func(int) error { return rl.drain(ctx) },
		func(int) error { return rl.send(ctx) }, func(int) error { return rawInsert(ctx, b.large, rl.peer, sealed) })
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioGE(fmt.Sprintf("send throughput / raw insert throughput at %s (raw time / send time)", b.L), raws, sends, 0.5,
		" (raw vs send); send = encrypt + seal + one tx (pending row + session) + hand-off"))
	return rs, nil
}

// rawInsert is the floor of a send: BEGIN IMMEDIATE; INSERT (sealed
// bytes); COMMIT on the store's own connection, through the project's one
// transaction helper.
func rawInsert(ctx context.Context, e *env, to store.DeviceAddress, sealed []byte) error {
	id := store.NewLogicalMessageID()
	return rawInsertTx(ctx, e.rawDB(), to, id, sealed)
}

// rawInsertTx inserts sealed as a pending row for to in its own
// transaction, through the generated query and the one transaction
// helper.
func rawInsertTx(ctx context.Context, conn *sql.DB, to store.DeviceAddress, id store.LogicalMessageID, sealed []byte) error {
	return sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		_, err := db.New(tx).InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
			RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: id[:], Sealed: sealed,
		})
		return err
	})
}
