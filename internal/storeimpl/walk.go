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
	return func(yield func(store.PendingMessage, error) bool) {
		var floor *int64 // after a restart from the start: rows at or below it were yielded
		for paged := false; ; paged = true {
			if err := ctx.Err(); err != nil {
				yield(store.PendingMessage{}, err)
				return
			}
			page, err := p.PendingMessages(ctx, req)
			if err != nil && paged && req.After != nil && *req.After < 0 && errors.Is(err, store.ErrInvalidArgument) {
				// The request was valid for the page before: only the
				// negative cursor can be refused now.
				floor, req.After = req.After, nil
				page, err = p.PendingMessages(ctx, req)
			}
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					err = cerr
				}
				yield(store.PendingMessage{}, err)
				return
			}
			ms, us := page.Messages, page.Unreadable
			for floor != nil && len(ms) > 0 && ms[0].Sequence <= *floor {
				ms = ms[1:]
			}
			for floor != nil && len(us) > 0 && us[0].Sequence <= *floor {
				us = us[1:]
			}
			for len(ms) > 0 || len(us) > 0 {
				if err := ctx.Err(); err != nil {
					yield(store.PendingMessage{}, err)
					return
				}
				if len(us) == 0 || (len(ms) > 0 && ms[0].Sequence < us[0].Sequence) {
					if !yield(ms[0], nil) {
						return
					}
					ms = ms[1:]
					continue
				}
				if !yield(store.PendingMessage{}, &store.UnreadableError{Entries: us[:1:1]}) {
					return
				}
				us = us[1:]
			}
			if page.NextAfterSequence == nil {
				return
			}
			req.After = page.NextAfterSequence
		}
	}
}
