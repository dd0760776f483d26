package sqlitestore

import (
	"context"
	"math"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// sealedTable describes one table holding sealed values, as the key
// rotation walks it: its name, how its rows are counted, and how they are
// read in key order, each with its record type and associated data and
// how its sealed value is written back.
type sealedTable struct {
	name  string
	count func(ctx context.Context, q *db.Queries) (int64, error)
	// walk starts a walk from the table's first row.
	walk func() rowBatches
	// reportSkipped is false for storage_key, whose verifiers go with
	// their key: one that does not open is left as it is and deleted when
	// its key is dropped.
	reportSkipped bool
}

// rowBatches returns up to limit rows after the last one it returned, in
// key order; fewer than limit once the table is walked.
type rowBatches func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error)

// sealedTables lists every table holding sealed values, in the order
// RotateKey walks them and reports the rows it skipped.
var sealedTables = []sealedTable{
	{name: "local_identity", count: countLocalIdentity, walk: walkLocalIdentity, reportSkipped: true},
	addressTable("identity_pin", seal.RecordIdentityPin,
		func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountIdentityPinRows(ctx) },
		func(ctx context.Context, q *db.Queries, after addressCursor, limit int64) ([]addressRow, error) {
			return addressRows(q.RotationIdentityPinBatch(ctx, db.RotationIdentityPinBatchParams{AfterUserID: after.userID, AfterDeviceID: after.deviceID, RowLimit: limit}))
		},
		func(ctx context.Context, q *db.Queries, a store.DeviceAddress, v []byte) error {
			return q.UpdateIdentityPinSealed(ctx, db.UpdateIdentityPinSealedParams{Sealed: v, UserID: a.UserID, DeviceID: a.DeviceID})
		}),
	addressTable("session", seal.RecordSession,
		func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountSessionRows(ctx) },
		func(ctx context.Context, q *db.Queries, after addressCursor, limit int64) ([]addressRow, error) {
			return addressRows(q.RotationSessionBatch(ctx, db.RotationSessionBatchParams{AfterUserID: after.userID, AfterDeviceID: after.deviceID, RowLimit: limit}))
		},
		func(ctx context.Context, q *db.Queries, a store.DeviceAddress, v []byte) error {
			return q.UpdateSessionSealed(ctx, db.UpdateSessionSealedParams{Sealed: v, UserID: a.UserID, DeviceID: a.DeviceID})
		}),
	addressTable("session_initiation", seal.RecordSessionInitiation,
		func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountSessionInitiationRows(ctx) },
		func(ctx context.Context, q *db.Queries, after addressCursor, limit int64) ([]addressRow, error) {
			return addressRows(q.RotationSessionInitiationBatch(ctx, db.RotationSessionInitiationBatchParams{AfterUserID: after.userID, AfterDeviceID: after.deviceID, RowLimit: limit}))
		},
		func(ctx context.Context, q *db.Queries, a store.DeviceAddress, v []byte) error {
			return q.UpdateSessionInitiationSealed(ctx, db.UpdateSessionInitiationSealedParams{Sealed: v, UserID: a.UserID, DeviceID: a.DeviceID})
		}),
	messageTable("pending_outbound_message", seal.RecordPendingOutbound,
		func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountPendingOutbound(ctx) },
		func(ctx context.Context, q *db.Queries, from, limit int64) ([]messageRow, error) {
			rows, err := q.SealedPendingOutboundBatch(ctx, db.SealedPendingOutboundBatchParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: from, RowLimit: limit})
			out := make([]messageRow, len(rows))
			for i, r := range rows {
				// Checked as a page checks it: a corrupt row is never
				// opened.
				d := decodePending(pendingRow(r))
				out[i] = messageRow{seq: r.Sequence, addr: d.to, id: d.id, sealed: d.sealed}
				if bad := check(d, nil); bad != nil {
					out[i].bad = bad.Cause
				}
			}
			return out, err
		},
		func(ctx context.Context, q *db.Queries, seq int64, v []byte) error {
			return q.UpdatePendingOutboundSealed(ctx, db.UpdatePendingOutboundSealedParams{Sealed: v, Sequence: seq})
		}),
	messageTable("pending_inbound_message", seal.RecordPendingInbound,
		func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountPendingInboundRows(ctx) },
		func(ctx context.Context, q *db.Queries, from, limit int64) ([]messageRow, error) {
			rows, err := q.RotationPendingInboundBatch(ctx, db.RotationPendingInboundBatchParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: from, RowLimit: limit})
			out := make([]messageRow, len(rows))
			for i, r := range rows {
				var c columns
				from, id, sealed := c.message("sender_user_id", r.SenderUserID, "sender_device_id", r.SenderDeviceID, r.LogicalID, r.Sealed, r.SealedSize)
				out[i] = messageRow{seq: r.Sequence, addr: from, id: id, sealed: sealed, bad: c.err()}
			}
			return out, err
		},
		func(ctx context.Context, q *db.Queries, seq int64, v []byte) error {
			return q.UpdatePendingInboundSealed(ctx, db.UpdatePendingInboundSealedParams{Sealed: v, Sequence: seq})
		}),
	{name: "storage_key", count: countStorageKeys, walk: walkStorageKeys},
}

func countLocalIdentity(ctx context.Context, q *db.Queries) (int64, error) {
	return q.CountLocalIdentityRows(ctx)
}

// walkLocalIdentity walks the one local_identity row, checked as a row of
// the tables keyed by a device address is.
func walkLocalIdentity() rowBatches {
	done := false
	write := func(ctx context.Context, q *db.Queries, _ store.DeviceAddress, v []byte) error {
		return q.UpdateLocalIdentitySealed(ctx, v)
	}
	return func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
		if done {
			return nil, nil
		}
		rows, err := addressRows(q.RotationLocalIdentity(ctx))
		if err != nil {
			return nil, err
		}
		done = true
		out := make([]sealedRow, len(rows))
		for i, r := range rows {
			out[i] = r.sealedRow("local_identity", seal.RecordLocalIdentity, write)
		}
		return out, nil
	}
}

func countStorageKeys(ctx context.Context, q *db.Queries) (int64, error) {
	rows, err := q.ListStorageKeys(ctx)
	return int64(len(rows)), err
}

// walkStorageKeys walks the storage key verifiers. storage_key holds a
// handful of rows: it is listed whole and cut into batches here.
func walkStorageKeys() rowBatches {
	after := int64(-1)
	return func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
		rows, err := q.ListStorageKeys(ctx)
		if err != nil {
			return nil, err
		}
		var out []sealedRow
		for _, r := range rows {
			if r.KeyID <= after || int64(len(out)) == limit {
				continue
			}
			after = r.KeyID
			keyID := r.KeyID
			out = append(out, sealedRow{
				id: store.SkippedRow{Table: "storage_key"}, rt: seal.RecordKeyVerifier,
				ad: seal.KeyVerifierAD(seal.KeyID(keyID)), sealed: r.Verifier,
				update: func(ctx context.Context, q *db.Queries, v []byte) error {
					return q.UpdateStorageKeyVerifier(ctx, db.UpdateStorageKeyVerifierParams{Verifier: v, KeyID: keyID})
				},
			})
		}
		return out, nil
	}
}

// addressRow is a row keyed by a device address (pin, session,
// initiation), each value raw.
type addressRow struct {
	userID, deviceID, sealed any
}

// addressCursor is the key of the last row walked, as stored: a cursor of
// the stored classes resumes right after that row in SQLite's order (which
// sorts numbers before text before blobs) whatever the row holds.
type addressCursor struct {
	userID, deviceID any
}

// sealedRow checks r's columns and returns it as the rotation walks it,
// bound to its address and written back by write.
func (r addressRow) sealedRow(table string, rt seal.RecordType, write func(ctx context.Context, q *db.Queries, a store.DeviceAddress, v []byte) error) sealedRow {
	var c columns
	addr := c.address("user_id", r.userID, "device_id", r.deviceID)
	sealed := c.blob("sealed", r.sealed)
	return sealedRow{
		id: store.SkippedRow{Table: table, Address: addr}, bad: c.err(), rt: rt, ad: seal.AddressAD(addr.UserID, addr.DeviceID), sealed: sealed,
		update: func(ctx context.Context, q *db.Queries, v []byte) error { return write(ctx, q, addr, v) },
	}
}

// addressModel is a generated rotation row of a table keyed by
// (user_id, device_id) with one sealed column: the four share one shape.
type addressModel interface {
	db.RotationLocalIdentityRow | db.RotationIdentityPinBatchRow | db.RotationSessionBatchRow | db.RotationSessionInitiationBatchRow
}

// addressRows converts a batch of such rows (and its error, passed
// through) to addressRows.
func addressRows[T addressModel](rows []T, err error) ([]addressRow, error) {
	out := make([]addressRow, len(rows))
	for i, r := range rows {
		m := db.RotationSessionBatchRow(r)
		out[i] = addressRow{m.UserID, m.DeviceID, m.Sealed}
	}
	return out, err
}

// addressTable describes a table keyed by (user_id, device_id) whose
// sealed value is bound to that address.
func addressTable(
	name string,
	rt seal.RecordType,
	count func(ctx context.Context, q *db.Queries) (int64, error),
	read func(ctx context.Context, q *db.Queries, after addressCursor, limit int64) ([]addressRow, error),
	write func(ctx context.Context, q *db.Queries, a store.DeviceAddress, v []byte) error,
) sealedTable {
	walk := func() rowBatches {
		// Minus infinity sorts before every value but NULL (user_id is NOT
		// NULL), whatever its storage class.
		after := addressCursor{userID: math.Inf(-1), deviceID: int64(-1)}
		return func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
			rows, err := read(ctx, q, after, limit)
			if err != nil {
				return nil, err
			}
			out := make([]sealedRow, 0, len(rows))
			for _, r := range rows {
				after = addressCursor{r.userID, r.deviceID}
				out = append(out, r.sealedRow(name, rt, write))
			}
			return out, nil
		}
	}
	return sealedTable{name: name, count: count, walk: walk, reportSkipped: true}
}

// messageRow is one row of a message table (pending outbound or inbound):
// its sequence, the remote device, the logical id and the sealed message,
// or bad (matching store.ErrCorruptRow) if its columns do not decode.
type messageRow struct {
	seq    int64
	addr   store.DeviceAddress
	id     store.LogicalMessageID
	sealed []byte
	bad    error
}

// messageTable describes a message table keyed by sequence whose sealed
// value is bound to its remote device and logical id.
func messageTable(
	name string,
	rt seal.RecordType,
	count func(ctx context.Context, q *db.Queries) (int64, error),
	read func(ctx context.Context, q *db.Queries, from, limit int64) ([]messageRow, error),
	write func(ctx context.Context, q *db.Queries, seq int64, v []byte) error,
) sealedTable {
	walk := func() rowBatches {
		// From the smallest sequence (a nil cursor): only a damaged
		// database holds one at or below 0, and its rows must not stay
		// under the old key.
		var after *int64
		return func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
			from, more := firstSequence(after)
			if !more {
				return nil, nil
			}
			rows, err := read(ctx, q, from, limit)
			if err != nil {
				return nil, err
			}
			out := make([]sealedRow, 0, len(rows))
			for _, r := range rows {
				seq := r.seq
				after = &seq
				out = append(out, sealedRow{
					id:  store.SkippedRow{Table: name, Address: r.addr, Sequence: seq, ID: r.id},
					bad: r.bad, rt: rt, ad: seal.MessageAD(r.addr.UserID, r.addr.DeviceID, r.id), sealed: r.sealed,
					update: func(ctx context.Context, q *db.Queries, v []byte) error { return write(ctx, q, seq, v) },
				})
			}
			return out, nil
		}
	}
	return sealedTable{name: name, count: count, walk: walk, reportSkipped: true}
}
