package storeimpl

import (
	"context"
	"errors"
	"iter"

	"github.com/securemsg/storage/store"
)

// WalkPendingMessages returns an iterator over the pending messages p
// holds after req.After (from the start if nil), to req.Recipient only if
// it is set, in ascending sequence order, read req.Limit at a time: each
// page is one call to p.PendingMessages, so its own transaction, with the
// rule pages follow (a message acknowledged or abandoned before its page
// is read is not yielded, none is yielded twice, one sent during the walk
// is yielded by a later page). A page is read only when the loop has
// taken every message of the one before.
//
// Each message is yielded with a nil error. Each row that cannot be
// opened is yielded in its place in the sequence order as a zero
// PendingMessage and an *UnreadableError holding that row alone, and the
// walk goes on. Any other error (req invalid, a storage error) is yielded
// with a zero PendingMessage and ends the walk; if ctx is done, the walk
// yields ctx.Err() before the next message or page and ends. Breaking
// out of the loop stops the walk with no further call to p.
//
// A page that ends on a negative sequence (a damaged database's row) is
// followed from that cursor; if the caller abandoned every row at a
// negative sequence meanwhile, p refuses the cursor (see CheckCursor),
// and every row left is above it: the walk then reads from the start,
// skipping any row at or below the cursor, so abandoning what it yields
// never ends it.
func WalkPendingMessages(ctx context.Context, p store.Pending, req store.PageRequest) iter.Seq2[store.PendingMessage, error] {
	read := func(after *int64) (store.PendingMessagePage, error) {
		req.After = after
		return p.PendingMessages(ctx, req)
	}
	return walk(ctx, req.After, read, func(page store.PendingMessagePage) ([]store.PendingMessage, []store.UnreadablePendingMessage, *int64) {
		return page.Messages, page.Unreadable, page.NextAfterSequence
	}, func(m store.PendingMessage) int64 { return m.Sequence },
		func(u store.UnreadablePendingMessage) int64 { return u.Sequence },
		func(u store.UnreadablePendingMessage) error {
			return &store.UnreadableError{Entries: []store.UnreadablePendingMessage{u}}
		})
}

// WalkPendingInbound is WalkPendingMessages for the pending inbound queue
// of q: each row that cannot be opened is yielded as a zero
// InboundMessage and an *UnreadableInboundError holding it, in its place.
func WalkPendingInbound(ctx context.Context, q store.InboundQueue, req store.InboundPageRequest) iter.Seq2[store.InboundMessage, error] {
	read := func(after *int64) (store.InboundPage, error) {
		req.After = after
		return q.PendingInbound(ctx, req)
	}
	return walk(ctx, req.After, read, func(page store.InboundPage) ([]store.InboundMessage, []store.UnreadableInboundMessage, *int64) {
		return page.Messages, page.Unreadable, page.NextAfterSequence
	}, func(m store.InboundMessage) int64 { return m.Sequence },
		func(u store.UnreadableInboundMessage) int64 { return u.Sequence },
		func(u store.UnreadableInboundMessage) error { return &store.UnreadableInboundError{Entry: u} })
}

// walk is the walk of either queue: read reads the page after a cursor,
// parts splits a page into its messages, its unreadable rows and its next
// cursor, the seq functions give a message's and an unreadable row's
// sequence, and unreadable the error yielded for an unreadable row.
func walk[P, M, U any](ctx context.Context, after *int64, read func(*int64) (P, error), parts func(P) ([]M, []U, *int64),
	seqM func(M) int64, seqU func(U) int64, unreadable func(U) error) iter.Seq2[M, error] {
	return func(yield func(M, error) bool) {
		var zero M
		var floor *int64 // after a restart from the start: rows at or below it were yielded
		for paged := false; ; paged = true {
			if err := ctx.Err(); err != nil {
				yield(zero, err)
				return
			}
			page, err := read(after)
			if err != nil && paged && after != nil && *after < 0 && errors.Is(err, store.ErrInvalidArgument) {
				// The request was valid for the page before: only the
				// negative cursor can be refused now.
				floor, after = after, nil
				page, err = read(after)
			}
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					err = cerr
				}
				yield(zero, err)
				return
			}
			ms, us, next := parts(page)
			for floor != nil && len(ms) > 0 && seqM(ms[0]) <= *floor {
				ms = ms[1:]
			}
			for floor != nil && len(us) > 0 && seqU(us[0]) <= *floor {
				us = us[1:]
			}
			for len(ms) > 0 || len(us) > 0 {
				if err := ctx.Err(); err != nil {
					yield(zero, err)
					return
				}
				if len(us) == 0 || (len(ms) > 0 && seqM(ms[0]) < seqU(us[0])) {
					if !yield(ms[0], nil) {
						return
					}
					ms = ms[1:]
					continue
				}
				if !yield(zero, unreadable(us[0])) {
					return
				}
				us = us[1:]
			}
			if next == nil {
				return
			}
			after = next
		}
	}
}
