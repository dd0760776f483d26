package storeimpl

import (
	"context"
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
func WalkPendingMessages(ctx context.Context, p store.Pending, req store.PageRequest) iter.Seq2[store.PendingMessage, error] {
	return func(yield func(store.PendingMessage, error) bool) {
		for {
			if err := ctx.Err(); err != nil {
				yield(store.PendingMessage{}, err)
				return
			}
			page, err := p.PendingMessages(ctx, req)
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					err = cerr
				}
				yield(store.PendingMessage{}, err)
				return
			}
			ms, us := page.Messages, page.Unreadable
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
