package sqlitestore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// inboundRow is a pending inbound row as the page queries read it, each
// column raw (see rawrow.go).
type inboundRow struct {
	Sequence       int64
	SenderUserID   any
	SenderDeviceID any
	LogicalID      any
	Sealed         any
	// SealedSize is the sealed value's octet_length: Sealed is NULL when
	// it is over the bound (columns.sealed).
	SealedSize any
}

// inboundPageRow is a row of either inbound page query: the same columns.
type inboundPageRow interface {
	db.PagePendingInboundRow | db.PagePendingInboundForSenderRow
}

// decodeInbound checks r's columns as decodePending does a pending
// outbound row's, the sender in the place of the recipient.
func decodeInbound[R inboundPageRow](r R) decodedRow {
	raw := inboundRow(r)
	var c columns
	from, id, sealed := c.message("sender_user_id", raw.SenderUserID, "sender_device_id", raw.SenderDeviceID, raw.LogicalID, raw.Sealed, raw.SealedSize)
	return decodedRow{seq: raw.Sequence, to: from, id: id, sealed: sealed, corrupt: strings.Join(c.problems, "; ")}
}

// PendingInbound implements store.InboundQueue.
func (s *Store) PendingInbound(ctx context.Context, req store.InboundPageRequest) (store.InboundPage, error) {
	if err := req.Validate(); err != nil {
		return store.InboundPage{}, storeimpl.OpPageInbound.Wrap(err)
	}
	from, more := firstSequence(req.After)
	var page store.InboundPage
	err := s.tx(ctx, readKind(req.After), func(q *txn) error {
		if err := checkInboundCursor(ctx, q.Queries, req.After); err != nil || !more {
			return err
		}
		limit := int64(req.Limit) + 1
		var rows []decodedRow
		if req.Sender == nil {
			all, err := q.PagePendingInbound(ctx, db.PagePendingInboundParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: from, RowLimit: limit})
			if err != nil {
				return err
			}
			rows = decodeInboundRows(all)
		} else {
			one, err := q.PagePendingInboundForSender(ctx, db.PagePendingInboundForSenderParams{
				SealedLimit:    storeimpl.MaxSealedMessageSize,
				SenderUserID:   req.Sender.UserID,
				SenderDeviceID: req.Sender.DeviceID,
				FromSequence:   from,
				RowLimit:       limit,
			})
			if err != nil {
				return err
			}
			rows = decodeInboundRows(one)
		}
		page = s.inboundPage(rows, req.Limit, req.Sender)
		return nil
	})
	if err != nil {
		return store.InboundPage{}, storeimpl.OpPageInbound.Wrap(err)
	}
	return page, nil
}

func decodeInboundRows[R inboundPageRow](rows []R) []decodedRow {
	out := make([]decodedRow, len(rows))
	for i, r := range rows {
		out[i] = decodeInbound(r)
	}
	return out
}

// inboundPage builds the page of the rows read for a page of limit, for
// want (nil: every sender's), as page does for pending outbound rows:
// the probe row is never opened, and a row that check refuses or that
// does not open is reported unreadable.
func (s *Store) inboundPage(rows []decodedRow, limit int, want *store.DeviceAddress) store.InboundPage {
	var page store.InboundPage
	if len(rows) > limit {
		rows = rows[:limit]
		next := rows[len(rows)-1].seq
		page.NextAfterSequence = &next
	}
	page.Messages = make([]store.InboundMessage, 0, len(rows))
	for _, r := range rows {
		if m, bad := s.openInbound(r, want); bad != nil {
			page.Unreadable = append(page.Unreadable, *bad)
		} else {
			page.Messages = append(page.Messages, m)
		}
	}
	return page
}

// openInbound opens r, read for the sender want (nil: any), or returns
// its unreadable entry, with check's rules.
func (s *Store) openInbound(r decodedRow, want *store.DeviceAddress) (store.InboundMessage, *store.UnreadableInboundMessage) {
	m := store.InboundMessage{Sequence: r.seq, Sender: r.to, ID: r.id}
	if bad := check(r, want); bad != nil {
		return store.InboundMessage{}, &store.UnreadableInboundMessage{InboundMessage: m, Cause: bad.Cause}
	}
	pt, err := storeimpl.OpenInbound(s.keys, r.to, r.id, r.sealed)
	if err != nil {
		return store.InboundMessage{}, &store.UnreadableInboundMessage{InboundMessage: m, Cause: err}
	}
	m.Plaintext = pt
	return m, nil
}

// checkInboundCursor refuses a negative cursor unless a pending inbound
// row with a negative sequence is stored (see storeimpl.CheckCursor).
func checkInboundCursor(ctx context.Context, q *db.Queries, after *int64) error {
	if after == nil || *after >= 0 {
		return nil
	}
	negative, err := q.PendingInboundNegativeSequence(ctx)
	if err != nil {
		return err
	}
	return storeimpl.CheckCursor(*after, len(negative) > 0)
}

// PendingInboundCount implements store.InboundQueue, from the table's
// indexes.
func (s *Store) PendingInboundCount(ctx context.Context, sender *store.DeviceAddress) (int64, error) {
	if sender != nil {
		if err := sender.Validate(); err != nil {
			return 0, storeimpl.OpCountInbound.Wrap(err)
		}
	}
	var n int64
	var err error
	if sender == nil {
		_, n, err = s.countAll(ctx)
	} else {
		err = s.tx(ctx, statement, func(q *txn) error {
			n, err = q.CountPendingInboundForSender(ctx, db.CountPendingInboundForSenderParams{SenderUserID: sender.UserID, SenderDeviceID: sender.DeviceID})
			return err
		})
	}
	if err != nil {
		return 0, storeimpl.OpCountInbound.Wrap(err)
	}
	return n, nil
}

// RemovePendingInbound implements store.InboundQueue. A row whose id is
// processed, as every row a receive stores, is removed by one statement;
// one without (written by an older release) is removed in a transaction
// that records its id, so that the sender's retry is a duplicate.
func (s *Store) RemovePendingInbound(ctx context.Context, sequence int64) (store.RemovedInbound, bool, error) {
	var removed store.RemovedInbound
	var found bool
	err := s.tx(ctx, countedStatement, func(q *txn) error {
		rows, err := q.DeletePendingInboundProcessed(ctx, sequence)
		if err != nil || len(rows) == 0 {
			return err
		}
		found, removed = true, removedRow(rows[0].Likely, rows[0].Likely_2, rows[0].Likely_3)
		q.inbound--
		return nil
	})
	if err == nil && !found {
		err = s.tx(ctx, countedTransaction, func(q *txn) error {
			rows, err := q.DeletePendingInbound(ctx, sequence)
			if err != nil || len(rows) == 0 {
				return err
			}
			found, removed = true, removedRow(rows[0].Likely, rows[0].Likely_2, rows[0].Likely_3)
			q.inbound--
			if !removed.Decoded {
				return nil
			}
			_, err = q.InsertProcessedInbound(ctx, db.InsertProcessedInboundParams{
				SenderUserID: removed.Sender.UserID, SenderDeviceID: removed.Sender.DeviceID, LogicalID: removed.ID[:], ProcessedAt: time.Now().Unix(),
			})
			return err
		})
	}
	if err != nil {
		return store.RemovedInbound{}, false, storeimpl.OpRemoveInbound.On(sequence).Wrap(err)
	}
	return removed, found, nil
}

// removedRow decodes what a removal returned: sqlc names RETURNING's
// columns by their function (sender user id, sender device id, logical
// id).
func removedRow(user, device, id any) store.RemovedInbound {
	var c columns
	var r store.RemovedInbound
	r.Sender, r.ID, _ = c.message("sender_user_id", user, "sender_device_id", device, id, []byte(nil), nil)
	r.Decoded = len(c.problems) == 0 && r.Sender.Validate() == nil
	return r
}

// receive is CommitReceived's own statements, in its transaction: the
// message (peer, id) is looked up in the pending inbound queue, then its
// id recorded as processed, then, if it is new, it is stored sealed.
func (s *Store) receive(ctx context.Context, q *txn, peer store.DeviceAddress, id store.LogicalMessageID, sealed []byte, processedAt int64) (store.Received, error) {
	seqs, err := q.PendingInboundSequence(ctx, db.PendingInboundSequenceParams{SenderUserID: peer.UserID, SenderDeviceID: peer.DeviceID, LogicalID: id[:]})
	if err != nil {
		return store.Received{}, err
	}
	n, err := q.InsertProcessedInbound(ctx, db.InsertProcessedInboundParams{
		SenderUserID: peer.UserID, SenderDeviceID: peer.DeviceID, LogicalID: id[:], ProcessedAt: processedAt,
	})
	if err != nil {
		return store.Received{}, err
	}
	if n == 0 {
		// A duplicate only if the table row says so: the conflict was
		// found through the index.
		held, err := q.ProcessedInboundHeld(ctx, db.ProcessedInboundHeldParams{SenderUserID: peer.UserID, SenderDeviceID: peer.DeviceID, LogicalID: id[:]})
		if err != nil {
			return store.Received{}, err
		}
		if held == 0 {
			return store.Received{}, fmt.Errorf("%w: the processed id's index names a row that is not this message", store.ErrCorruptIndex)
		}
	}
	switch {
	case len(seqs) > 0:
		// Still pending (its processed id, missing only in a file written
		// by an older release, is recorded now).
		return store.Received{Status: store.ReceivedPending, Sequence: seqs[0]}, nil
	case n == 0:
		return store.Received{Status: store.ReceivedBefore}, nil
	}
	seq, err := q.InsertPendingInbound(ctx, db.InsertPendingInboundParams{SenderUserID: peer.UserID, SenderDeviceID: peer.DeviceID, LogicalID: id[:], Sealed: sealed})
	if isUniqueViolation(err) {
		// The table row said the message is not pending; only an index
		// that disagrees with its table can find it there.
		return store.Received{}, fmt.Errorf("%w: the pending inbound index names a row that is not this message", store.ErrCorruptIndex)
	}
	if err != nil {
		return store.Received{}, fmt.Errorf("pending inbound: %w", err)
	}
	q.inbound++
	return store.Received{Status: store.ReceivedNew, Sequence: seq}, nil
}
