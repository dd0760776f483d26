package client

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/store"
)

// AllPendingMessages returns an iterator over every pending message, or
// only those to recipient if it is not nil, in ascending sequence order,
// for a range loop:
//
//	for m, err := range c.AllPendingMessages(ctx, nil) {
//		if errors.Is(err, store.ErrUnreadable) {
//			continue // or abandon it: errors.As gives the *store.UnreadableError
//		}
//		if err != nil {
//			return err
//		}
//		...
//	}
//
// It reads store.MaxPageSize messages at a time, each page its own storage
// transaction, as PendingMessages does: a message acknowledged or abandoned
// before its page is read is not yielded, none is yielded twice, and one
// sent before the last page is read is yielded in its place. The next
// page is read only once the loop has taken every message of the one
// before; breaking out of the loop stops the walk with no further storage
// call.
//
// Each message is yielded with a nil error. A pending message that cannot
// be opened (see store.UnreadablePendingMessage), or that the store
// returns for recipient but is stored for another (store.ErrCorruptRow),
// is yielded in its place as a zero PendingMessage and a
// *store.UnreadableError holding it alone, and the walk goes on; abandoning
// what it yields (AbandonPendingMessage), at any sequence, never ends it.
// Any other error ends the walk, yielded once with a zero
// PendingMessage: ErrNotInitialized before Initialize, store.ErrInvalidArgument
// for a malformed recipient, a storage error, or ctx.Err() itself when
// ctx ends (checked before every message and page).
func (c *Client) AllPendingMessages(ctx context.Context, recipient *store.DeviceAddress) iter.Seq2[store.PendingMessage, error] {
	return func(yield func(store.PendingMessage, error) bool) {
		if err := c.checkInitialized(); err != nil {
			yield(store.PendingMessage{}, fmt.Errorf("client: all pending messages: %w", err))
			return
		}
		req := store.PageRequest{Limit: store.MaxPageSize, Recipient: recipient}
		for m, err := range storeimpl.WalkPendingMessages(ctx, c.st, req) {
			var ue *store.UnreadableError
			if err != nil && !errors.As(err, &ue) && err != ctx.Err() {
				err = fmt.Errorf("client: all pending messages: %w", err)
			}
			if !yield(m, err) {
				return
			}
		}
	}
}
