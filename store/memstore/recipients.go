package memstore

import (
	"context"
	"slices"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// PendingRecipients implements store.Pending. It looks at every pending
// row (the in-memory store keeps no recipient index), and gives the
// answers the SQLite store's index gives.
func (s *Store) PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	from := storeimpl.RecipientsFrom(req)
	oldest := map[store.DeviceAddress]int64{}
	err := s.locked(ctx, func() error {
		for _, r := range s.pending { // ascending by seq: the first seen is the oldest
			if a := r.key.addr; from.Less(a) {
				if _, seen := oldest[a]; !seen {
					oldest[a] = r.seq
				}
			}
		}
		return nil
	})
	if err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	var rows []store.PendingRecipient
	for a, seq := range oldest {
		rows = append(rows, store.PendingRecipient{Recipient: a, OldestSequence: seq})
	}
	slices.SortFunc(rows, func(a, b store.PendingRecipient) int {
		if a.Recipient.Less(b.Recipient) {
			return -1
		}
		if b.Recipient.Less(a.Recipient) {
			return 1
		}
		return 0
	})
	return storeimpl.RecipientPage(rows[:min(len(rows), req.Limit+1)], req.Limit), nil
}
