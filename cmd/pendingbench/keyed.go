package main

import (
	"fmt"
	"time"

	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
)

// receiveBatch is how many envelopes the bounded receive line takes in
// one call.
const receiveBatch = 16

// keyedLines time the send keyed by the application's id and the bounded
// receive, at the large size:
//   - a fresh id (client.Client.SendWithID) against the raw floor of a
//     send: seal the row, then BEGIN IMMEDIATE; INSERT; COMMIT, target
//     >= 0.85 of its throughput;
//   - the same id sent again while pending (a retry of its pending row,
//     nothing stored but the session) against RetryPendingMessages of
//     that one message, target <= 1.2 of its time: no fsync beyond the
//     retry's;
//   - PollAtMost of receiveBatch envelopes in one call against
//     receiveBatch calls of PollAtMost(1) on the same envelopes, target
//     <= 1.1 of its time.
func keyedLines(b *bench) ([]result, error) {
	ctx := b.ctx
	rig, err := newSendRig(ctx, b.large, "bench-peer-keyed")
	if err != nil {
		return nil, err
	}
	keyed := func(int) error {
		_, err := rig.a.SendWithID(ctx, rig.peer, store.NewLogicalMessageID(), sendPlaintext)
		return err
	}
	floor := func(int) error {
		id := store.NewLogicalMessageID()
		sealed, err := benchseed.SealRow(b.large.keys, rig.peer, id, sendPlaintext)
		if err != nil {
			return err
		}
		return rawInsertTx(ctx, b.large.rawDB(), rig.peer, id, sealed)
	}
	sends, raws, err := interleaveWith(b.o.DMLIters, func(int) error { return rig.drain(ctx) }, keyed, floor)
	if err != nil {
		return nil, err
	}
	rs := []result{ratioGE(fmt.Sprintf("keyed send (SendWithID, fresh id) throughput / raw seal + insert throughput at %s (raw time / send time)", b.L), raws, sends, 0.85,
		" (raw vs send); send = encrypt + seal + one tx (pending row + session) + hand-off")}

	// One message pending for a device of its own: a retry of it and the
	// same id sent again both read it, store the session, hand it off.
	again, err := newSendRig(ctx, b.large, "bench-peer-again")
	if err != nil {
		return nil, err
	}
	id := store.NewLogicalMessageID()
	if _, err := again.a.SendWithID(ctx, again.peer, id, sendPlaintext); err != nil {
		return nil, err
	}
	resend := func(int) error {
		ok, err := again.a.SendWithID(ctx, again.peer, id, sendPlaintext)
		if err == nil && !ok {
			err = fmt.Errorf("send of a pending id stored a new row")
		}
		return err
	}
	retry := func(int) error {
		sent, err := again.a.RetryPendingMessages(ctx, again.peer)
		if err == nil && len(sent) != 1 {
			err = fmt.Errorf("retry sent %d messages, want 1", len(sent))
		}
		return err
	}
	re, rt, err := interleaveWith(b.o.DMLIters, func(int) error { return again.drain(ctx) }, resend, retry)
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("keyed send of a pending id / retry of that message at %s (time)", b.L), re, rt, 1.2,
		"; both: read the row, encrypt, one tx (the session), hand-off"))

	// The bounded receive: the same number of envelopes from the device,
	// in one call or one call each.
	self, err := rig.a.Address()
	if err != nil {
		return nil, err
	}
	fill := func(int) error {
		for range receiveBatch {
			if _, err := rig.peers.Clients[0].Send(ctx, self, sendPlaintext); err != nil {
				return err
			}
		}
		return nil
	}
	poll := func(n, max int) func(int) error {
		return func(int) error {
			got := 0
			for range n {
				res, err := rig.a.PollAtMost(ctx, max)
				if err != nil {
					return err
				}
				got += len(res)
			}
			if got != receiveBatch {
				return fmt.Errorf("received %d envelopes, want %d", got, receiveBatch)
			}
			return nil
		}
	}
	batch, one, err := alternate(b.o.DMLIters, nil, untimedFirst(fill, poll(1, receiveBatch)), untimedFirst(fill, poll(receiveBatch, 1)))
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("bounded receive: PollAtMost(%d) / %d x PollAtMost(1) at %s (time)", receiveBatch, receiveBatch, b.L), batch, one, 1.1,
		fmt.Sprintf("; %d envelopes, each its own tx (session + pending inbound row), the send mutex per envelope", receiveBatch)))
	return rs, nil
}

// untimedFirst is a side that runs setup untimed, then times f.
func untimedFirst(setup, f func(int) error) func(int) (time.Duration, error) {
	return func(r int) (time.Duration, error) {
		if err := setup(r); err != nil {
			return 0, err
		}
		return timed(func() error { return f(r) })
	}
}
