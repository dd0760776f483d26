package legacy

// Step 2: sealing the set-aside rows batch by batch.

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// batch is step 2: it copies the next batch of legacy rows, sealed, into
// the sealed table in one transaction and reports whether rows may be
// left.
func (m *migrator) batch(ctx context.Context) (bool, error) {
	var (
		n    int
		next int64
		end  bool
	)
	err := sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		n, next, end = 0, m.next, m.end
		q := legacydb.New(tx)
		// Read in chunks, so that memory stays bounded by readChunk
		// messages whatever the batch size.
		for n < m.opts.Batch && !end {
			limit := min(m.hooks.chunk, m.opts.Batch-n)
			rows, err := q.LegacyPendingBatch(ctx, legacydb.LegacyPendingBatchParams{FirstSequence: next, RowLimit: int64(limit)})
			if err != nil {
				return fmt.Errorf("read legacy rows: %w", err)
			}
			if m.hooks.afterRead != nil {
				m.hooks.afterRead(len(rows))
			}
			for _, r := range rows {
				to, id, err := rowIdentity(r.Sequence, r.RecipientUserID, r.RecipientDeviceID, r.LogicalID)
				if err != nil {
					return err
				}
				sealed, err := m.keys.Seal(seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, id), r.Plaintext)
				clear(r.Plaintext)
				if err != nil {
					return fmt.Errorf("legacy sequence %d: %w", r.Sequence, err)
				}
				err = q.InsertSealedPendingWithSequence(ctx, legacydb.InsertSealedPendingWithSequenceParams{
					Sequence: r.Sequence, RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: id[:], Sealed: sealed,
				})
				if err != nil {
					return fmt.Errorf("legacy sequence %d: copy: %w", r.Sequence, err)
				}
				next, end = following(r.Sequence)
				n++
				if m.hooks.afterRow != nil {
					m.hooks.afterRow(m.copied + n)
				}
			}
			if len(rows) < limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	m.next, m.end = next, end
	m.copied += n
	m.sealed += int64(n)
	if n > 0 {
		m.report(store.LegacySeal)
	}
	return n == m.opts.Batch && !end, nil
}

// following returns the sequence after seq, and true if seq is the largest
// int64, which no sequence follows: a cursor that names the first
// sequence not yet read, rather than the last one read, so that a row at
// the smallest int64 is read like any other.
func following(seq int64) (next int64, end bool) {
	if seq == math.MaxInt64 {
		return 0, true
	}
	return seq + 1, false
}

func (m *migrator) report(p store.LegacyPhase) {
	if m.opts.Progress == nil {
		return
	}
	r := store.LegacyProgress{Phase: p, Sealed: m.sealed, Total: m.total}
	if p == store.LegacySetAside {
		r.Erased = m.erased
	}
	m.opts.Progress(r)
}
