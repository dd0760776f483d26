package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
)

// victimSet hands out distinct rows of a database drawn at random over
// the whole table, never twice in one run. It remembers only the rows
// handed out, so that the benchmark's own heap stays small (the heap a
// collection marks is part of what every allocation costs).
type victimSet struct {
	rng  *rand.Rand
	n    int
	used map[int]bool
}

func newVictims(rng *rand.Rand, n int) *victimSet {
	return &victimSet{rng: rng, n: n, used: map[int]bool{}}
}

func (v *victimSet) take() (int, error) {
	if len(v.used) >= v.n/2 {
		return 0, errors.New("out of victims")
	}
	for {
		if i := v.rng.IntN(v.n); !v.used[i] {
			v.used[i] = true
			return i, nil
		}
	}
}

// deleteOp deletes one pending message and reports whether it was pending.
type deleteOp func(ctx context.Context, e *env, r store.DeviceAddress, id store.LogicalMessageID) (bool, error)

// abandonPending abandons one message through e's client
// (client.Client.AbandonPending).
func abandonPending(ctx context.Context, e *env, r store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
	c, err := e.theClient(ctx)
	if err != nil {
		return false, err
	}
	st, err := c.AbandonPending(ctx, r, id)
	return st == client.Abandoned, err
}

// ackDelete deletes one message as an ACK does, with the session update
// the ACK carries (store CommitAck).
func ackDelete(ctx context.Context, e *env, r store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
	return e.s.CommitAck(ctx, r, id, store.Inbound{Update: store.PeerState{Session: ackSession}})
}

func deleteLines(b *bench) ([]result, error) {
	iters := min(b.o.DMLIters, (b.o.Small/2-b.o.ColdIters)/3) // three lines here, one cold; at most half the rows
	vs := b.victims
	var rs []result
	for _, op := range []struct {
		name string
		fn   deleteOp
	}{
		{"abandon (client.AbandonPending)", abandonPending},
		{"ACK-delete (store CommitAck)", ackDelete},
		{"delete (store AbandonPending)", func(ctx context.Context, e *env, r store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
			return e.s.AbandonPending(ctx, r, id)
		}},
	} {
		a, c, err := deleteBench(b.ctx, b.small, b.large, vs, iters, op.fn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.name, err)
		}
		rs = append(rs, ratioLE(fmt.Sprintf("%s: %s / %s pending", op.name, b.L, b.S), a, c, 1.3, ", random victims over the whole table, replaced untimed"))
	}
	return rs, nil
}

var ackSession = []byte("benchmark session state: opaque to the store, sealed at rest, about one hundred bytes long.......")

// deleteOnce deletes a random existing message of e with del and puts a
// new message for the same recipient in its place, untimed, so that the
// table keeps its size; it returns the time of the delete.
func deleteOnce(ctx context.Context, e *env, vs *victimSet, del deleteOp) (time.Duration, error) {
	row, err := vs.take()
	if err != nil {
		return 0, err
	}
	rcpt, id := e.layout.Row(row)
	d, err := timed(func() error {
		ok, err := del(ctx, e, rcpt, id)
		if err == nil && !ok {
			err = fmt.Errorf("%s: row %d was not pending", e.name, row)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	_, err = e.s.InsertPending(ctx, rcpt, benchseed.ReplacementID(), benchseed.Plaintext(row, benchseed.DefaultPlaintextSize))
	return d, err
}

// deleteBench times del on a different random existing message of large
// and of small in each round, alternating which goes first; it returns
// large's timings, then small's.
func deleteBench(ctx context.Context, small, large *env, vs map[*env]*victimSet, iters int, del deleteOp) (sample, sample, error) {
	for _, e := range []*env{small, large} {
		if _, err := e.theClient(ctx); err != nil {
			return nil, nil, err
		}
	}
	side := func(e *env) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) { return deleteOnce(ctx, e, vs[e], del) }
	}
	return alternate(iters, nil, side(large), side(small))
}
