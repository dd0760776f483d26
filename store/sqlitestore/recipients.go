package sqlitestore

import (
	"context"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// PendingRecipients implements store.Pending: a loose index scan of the
// recipient index (the query PendingOutboundRecipients in
// queries/recipients.sql): limit+1 steps of a few seeks each, in one
// statement (its own transaction), no message opened.
func (s *Store) PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	from := storeimpl.RecipientsFrom(req)
	var rows []db.PendingOutboundRecipientsRow
	err := s.tx(ctx, statement, func(q *txn) error {
		var err error
		rows, err = q.PendingOutboundRecipients(ctx, db.PendingOutboundRecipientsParams{
			AfterUserID:   from.UserID,
			AfterDeviceID: from.DeviceID,
			RowLimit:      int64(req.Limit) + 1,
		})
		return err
	})
	if err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	var out []store.PendingRecipient
	for _, r := range rows {
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: r.RecipientUserID, DeviceID: r.RecipientDeviceID},
			OldestSequence: r.OldestSequence,
		})
	}
	return storeimpl.RecipientPage(out, req.Limit), nil
}
