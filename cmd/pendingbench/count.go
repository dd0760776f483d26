package main

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/store"
)

func countLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	count := func(e *env, recipient *store.DeviceAddress, want int) func(int) error {
		return func(int) error { return countIs(ctx, e, recipient, want) }
	}
	opens0 := b.large.keys.Opens() + b.small.keys.Opens()
	// The first count after Open runs SELECT count(*); it is measured
	// cold in the cold-cache lines. Warm means after it.
	for _, e := range []*env{b.large, b.small} {
		if err := count(e, nil, e.n)(0); err != nil {
			return nil, err
		}
	}
	a, c, err := interleave(o.Iters, count(b.large, nil, b.large.n), count(b.small, nil, b.small.n))
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("count, all recipients: %s / %s pending (warm)", b.L, b.S), a, c, 2,
		", in-memory count checked against PRAGMA data_version")}

	// One recipient: in each round a recipient of the small database
	// drawn in proportion to its share (the recipient of a random
	// message: busy recipients are counted more often), and the recipient
	// of the large one holding the nearest number of messages, so that
	// the ratio shows the cost does not grow with the whole queue.
	nearest := func(want int) int {
		best := 0
		for r := range b.large.layout.Recipients() {
			if abs(b.large.layout.Share(r)-want) < abs(b.large.layout.Share(best)-want) {
				best = r
			}
		}
		return best
	}
	type pair struct{ small, large int }
	pairs := make([]pair, o.Iters)
	for i := range pairs {
		sr, k := 0, b.rng.IntN(b.small.n)
		for k >= b.small.layout.Share(sr) {
			k -= b.small.layout.Share(sr)
			sr++
		}
		pairs[i] = pair{sr, nearest(b.small.layout.Share(sr))}
	}
	countOne := func(e *env, pick func(pair) int) func(int) error {
		return func(round int) error {
			r := pick(pairs[round])
			a := e.layout.Address(r)
			return count(e, &a, e.layout.Share(r))(round)
		}
	}
	a, c, err = interleave(o.Iters, countOne(b.large, func(p pair) int { return p.large }), countOne(b.small, func(p pair) int { return p.small }))
	if err != nil {
		return nil, err
	}
	ls, ss := 0, 0
	for _, p := range pairs {
		ls, ss = ls+b.large.layout.Share(p.large), ss+b.small.layout.Share(p.small)
	}
	rs = append(rs, ratioLE(fmt.Sprintf("count, one recipient: %s / %s pending", b.L, b.S), a, c, 1.3,
		fmt.Sprintf(", per round a recipient drawn by share and the one of nearest share at %s (%d / %d messages on average), answered from the recipient index",
			b.L, ls/len(pairs), ss/len(pairs))))
	// What a user meets counting the recipient of a random message of
	// the large queue: that recipient's share, mostly a large one. The
	// count is SQLite's count of the recipient's index entries, so it
	// grows with the share; the library is judged against that floor,
	// the same query on the store's connection, on the same recipient in
	// a round (the shares span four orders of magnitude: sides drawn
	// apart would compare the draws), the side going first alternating.
	byShare := func() int {
		r, k := 0, b.rng.IntN(b.large.n)
		for k >= b.large.layout.Share(r) {
			k -= b.large.layout.Share(r)
			r++
		}
		return r
	}
	libR := make([]int, o.Iters)
	held := 0
	for i := range libR {
		libR[i] = byShare()
		held += b.large.layout.Share(libR[i])
	}
	rawR := libR
	q := db.New(b.large.rawDB())
	lib := func(round int) error {
		to := b.large.layout.Address(libR[round])
		return count(b.large, &to, b.large.layout.Share(libR[round]))(round)
	}
	a, c, err = interleave(o.Iters, lib, func(round int) error {
		to := b.large.layout.Address(rawR[round])
		n, err := q.CountPendingOutboundForRecipient(ctx, db.CountPendingOutboundForRecipientParams{RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID})
		if err == nil && n != int64(b.large.layout.Share(rawR[round])) {
			err = fmt.Errorf("raw count of %s: %d, want %d", to, n, b.large.layout.Share(rawR[round]))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("count, one recipient drawn by share / raw floor at %s", b.L), a, c, 1.3,
		fmt.Sprintf(", the store's count of the recipient of a random message (%d messages on average), the same for both sides in a round; the floor: the same query on the store's connection; %s",
			held/len(libR), a.spread())))
	opened := b.large.keys.Opens() + b.small.keys.Opens() - opens0
	rs = append(rs, result{Name: "records opened by count (all + one recipient)", Measured: float64(opened), Target: "0", Pass: opened == 0,
		Detail: fmt.Sprintf("sealspy.Keyring.Opens delta over %d counts", 5*o.Iters+2)})
	return rs, nil
}

// countIs counts e's pending messages for recipient (nil: all) through
// the store and checks there are want.
func countIs(ctx context.Context, e *env, recipient *store.DeviceAddress, want int) error {
	n, err := e.s.PendingMessageCount(ctx, recipient)
	if err == nil && n != int64(want) {
		err = fmt.Errorf("%s: count %d, want %d", e.name, n, want)
	}
	return err
}

func abs(x int) int { return max(x, -x) }
