package main

import (
	"fmt"
	"time"

	"github.com/securemsg/storage/client"
)

// coldLines time, at each size, the first call after the store was closed,
// its files evicted from the OS page cache and the store opened again
// (untimed): a page of all recipients, a page of one recipient, the count
// (whose first call runs SELECT count(*)) and an abandon, each at a fresh
// random place. They have no target: they report what a user meets
// after an app start on a cold disk cache.
func coldLines(b *bench) ([]result, error) {
	if coldNote != "" {
		return []result{{Name: "cold cache", Info: true, Detail: coldNote}}, nil
	}
	ctx, iters := b.ctx, b.o.ColdIters
	type coldOp struct {
		name string
		fn   func(e *env, round int) error
	}
	cursors := map[*env][2][]cursor{}
	victims := b.victims
	for _, e := range []*env{b.small, b.large} {
		cursors[e] = [2][]cursor{e.globalCursors(b.rng, iters), e.recipientCursors(b.rng, iters)}
		if _, err := e.theClient(ctx); err != nil { // the identity the cold abandons load
			return nil, err
		}
	}
	ops := []coldOp{
		{"page of 100, all recipients", func(e *env, r int) error { return e.page(ctx, cursors[e][0][r]) }},
		{"page of 100, one recipient", func(e *env, r int) error { return e.page(ctx, cursors[e][1][r]) }},
		{"count, all recipients (SELECT count(*))", func(e *env, _ int) error { return countIs(ctx, e, nil, e.n) }},
		{"abandon", nil},
	}
	var rs []result
	medians := map[string]time.Duration{}
	for _, op := range ops {
		var cold [2]sample
		for r := range iters {
			for k, e := range []*env{b.large, b.small} {
				if err := e.coldOpen(ctx); err != nil {
					return nil, err
				}
				var d time.Duration
				var err error
				if op.fn == nil {
					// The client loads its identity untimed: the app has
					// started; the abandon is what is timed.
					if e.client, err = client.Open(ctx, client.Config{Store: e.s, Transport: e.net, Directory: e.net}); err != nil {
						return nil, err
					}
					d, err = deleteOnce(ctx, e, victims[e], abandonPending)
				} else {
					d, err = timed(func() error { return op.fn(e, r) })
				}
				if err != nil {
					return nil, fmt.Errorf("cold %s: %w", op.name, err)
				}
				cold[k] = append(cold[k], d)
			}
		}
		medians[op.name] = cold[0].median()
		rs = append(rs, result{Name: fmt.Sprintf("cold: %s at %s", op.name, b.L), Info: true,
			Measured: cold[0].median().Seconds(), Unit: "s",
			Detail: fmt.Sprintf("%s at %s: %s; %s at %s", b.S, fmtDur(cold[1].median()), cold[1].spread(), cold[0].spread(), b.L)})
	}
	g, p := medians[ops[0].name], medians[ops[1].name]
	rs = append(rs, result{Name: fmt.Sprintf("cold: page one recipient / page all at %s", b.L), Info: true,
		Measured: p.Seconds() / g.Seconds(), Unit: "x", Detail: fmt.Sprintf("%s vs %s", fmtDur(p), fmtDur(g))})
	// Leave the stores warm and open for the lines after.
	for _, e := range []*env{b.large, b.small} {
		if err := e.open(ctx); err != nil {
			return nil, err
		}
	}
	return rs, nil
}
