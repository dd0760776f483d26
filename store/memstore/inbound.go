package memstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// inboundQueue is the pending inbound queue: rows ascending by sequence,
// each (sender, id) once, sequences from a high-water mark that only
// grows.
type inboundQueue struct {
	highWater int64
	rows      []pendingRow // key.addr is the sender
	byKey     map[pendingKey]int64
}

// after returns the index of the first row past the cursor after.
func (q *inboundQueue) after(after *int64) int {
	if after == nil {
		return 0
	}
	return sort.Search(len(q.rows), func(i int) bool { return q.rows[i].seq > *after })
}

// receiveLocked is CommitReceived's change: the message (peer, id) is
// given by its pending row if it has one, a duplicate if it was processed
// and is no longer pending, and otherwise stored sealed and processed.
func (s *Store) receiveLocked(peer store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) (store.Received, error) {
	k := pendingKey{peer, id}
	if seq, ok := s.inbound.byKey[k]; ok {
		s.processed[k] = struct{}{}
		return store.Received{Status: store.ReceivedPending, Sequence: seq}, nil
	}
	if _, seen := s.processed[k]; seen {
		return store.Received{Status: store.ReceivedBefore}, nil
	}
	sealed, err := storeimpl.SealInbound(s.keys, peer, id, plaintext)
	if err != nil {
		return store.Received{}, err
	}
	s.processed[k] = struct{}{}
	s.inbound.highWater++
	seq := s.inbound.highWater
	s.inbound.rows = append(s.inbound.rows, pendingRow{seq: seq, key: k, sealed: sealed})
	s.inbound.byKey[k] = seq
	return store.Received{Status: store.ReceivedNew, Sequence: seq}, nil
}

// PendingInbound implements store.InboundQueue.
func (s *Store) PendingInbound(ctx context.Context, req store.InboundPageRequest) (store.InboundPage, error) {
	if err := req.Validate(); err != nil {
		return store.InboundPage{}, storeimpl.OpPageInbound.Wrap(err)
	}
	var rows []pendingRow
	err := s.locked(ctx, func() error {
		if req.After != nil && *req.After < 0 {
			// Never handed out, and never stored here.
			return storeimpl.CheckCursor(*req.After, false)
		}
		for i := s.inbound.after(req.After); i < len(s.inbound.rows) && len(rows) <= req.Limit; i++ {
			if r := s.inbound.rows[i]; req.Sender == nil || r.key.addr == *req.Sender {
				rows = append(rows, r)
			}
		}
		return nil
	})
	if err != nil {
		return store.InboundPage{}, storeimpl.OpPageInbound.Wrap(err)
	}
	var page store.InboundPage
	if len(rows) > req.Limit {
		rows = rows[:req.Limit]
		next := rows[len(rows)-1].seq
		page.NextAfterSequence = &next
	}
	page.Messages = make([]store.InboundMessage, 0, len(rows))
	for _, r := range rows {
		m := store.InboundMessage{Sequence: r.seq, Sender: r.key.addr, ID: r.key.id}
		var cause error
		if err := r.key.addr.Validate(); err != nil {
			// Only a test-tampered row holds one.
			cause = fmt.Errorf("%w: sender %q: %v", store.ErrCorruptRow, r.key.addr, err)
		} else if m.Plaintext, err = storeimpl.OpenInbound(s.keys, r.key.addr, r.key.id, r.sealed); err != nil {
			cause = err
		}
		if cause != nil {
			m.Plaintext = nil
			page.Unreadable = append(page.Unreadable, store.UnreadableInboundMessage{InboundMessage: m, Cause: cause})
			continue
		}
		page.Messages = append(page.Messages, m)
	}
	return page, nil
}

// PendingInboundCount implements store.InboundQueue.
func (s *Store) PendingInboundCount(ctx context.Context, sender *store.DeviceAddress) (int64, error) {
	if sender != nil {
		if err := sender.Validate(); err != nil {
			return 0, storeimpl.OpCountInbound.Wrap(err)
		}
	}
	var n int64
	err := s.locked(ctx, func() error {
		for _, r := range s.inbound.rows {
			if sender == nil || r.key.addr == *sender {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, storeimpl.OpCountInbound.Wrap(err)
	}
	return n, nil
}

// RemovePendingInbound implements store.InboundQueue.
func (s *Store) RemovePendingInbound(ctx context.Context, sequence int64) (store.RemovedInbound, bool, error) {
	var removed store.RemovedInbound
	var found bool
	err := s.locked(ctx, func() error {
		i := sort.Search(len(s.inbound.rows), func(i int) bool { return s.inbound.rows[i].seq >= sequence })
		if i == len(s.inbound.rows) || s.inbound.rows[i].seq != sequence {
			return nil
		}
		r := s.inbound.rows[i]
		s.inbound.rows = append(s.inbound.rows[:i], s.inbound.rows[i+1:]...)
		delete(s.inbound.byKey, r.key)
		found = true
		removed = store.RemovedInbound{Sender: r.key.addr, ID: r.key.id, Decoded: r.key.addr.Validate() == nil}
		s.processed[r.key] = struct{}{} // as the SQLite store: a removed message stays processed
		return nil
	})
	if err != nil {
		return store.RemovedInbound{}, false, storeimpl.OpRemoveInbound.On(sequence).Wrap(err)
	}
	return removed, found, nil
}
