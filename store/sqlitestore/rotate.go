package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// RotationProgress reports how far a storage key rotation has walked one
// table. RotateKey sends one after every batch transaction has committed.
type RotationProgress struct {
	// Table is the table being walked.
	Table string
	// Done is the number of rows of Table walked so far in this pass
	// (re-sealed or found already under the new key).
	Done int64
	// Total is the number of rows Table held when its walk started. Rows
	// written meanwhile can make Done end above or below it.
	Total int64
	// Resealed is the number of rows of Table re-sealed so far in this
	// pass; Done - Resealed rows were already under the new key.
	Resealed int64
	// Pass counts the walks over every table, from 1. The walk is repeated
	// until a pass re-seals nothing, so the last pass only confirms.
	Pass int
}

// rotationTables lists the tables RotateKey walks, in order.
var rotationTables = []string{
	"local_identity",
	"identity_pin",
	"session",
	"session_initiation",
	"pending_outbound_message",
	"pending_inbound_message",
	"storage_key",
}

// maxRotationPasses bounds the walks over every table: the first re-seals,
// the second should find nothing left. A third pass that still finds rows
// under another key means something keeps sealing with it.
const maxRotationPasses = 3

// rotateMu serialises rotations in this process: two rotations of the same
// database at once would fight over which key is active.
var rotateMu sync.Mutex

// RotateKey replaces the storage key: every sealed value of the database
// ends up sealed with newKey, and the old keys are dropped.
//
// It records newKey in storage_key as 'active' (with a verifier sealed by
// it) and every other key as 'retiring', then adds newKey to the keyring,
// where it becomes the sealing key. It then re-seals every sealed row of
// every table (local_identity, identity_pin, session, session_initiation,
// pending_outbound_message, pending_inbound_message and the storage_key
// verifiers), batch rows per transaction, in key order, calling progress
// (if not nil) after each committed batch. Rows already sealed with newKey
// are skipped without being opened, so a rotation interrupted by an error,
// a cancelled context or a crash is finished by calling RotateKey again
// with the same key (after a restart, open the store with a keyring
// holding both keys). The walk is repeated until a pass re-seals nothing.
// Finally the retiring rows are deleted from storage_key and every key but
// newKey is forgotten by the keyring.
//
// Sequences, row identities and plaintexts do not change: a value is only
// opened and sealed again under the same record type and associated data.
//
// Writes may go on during a rotation: the store waits for writes that
// sealed with the old key to finish before it switches the sealing key, so
// none can land behind the walk.
//
// It returns an error wrapping store.ErrInvalidArgument for a zero key or
// a batch below 1, and seal errors (seal.ErrWrongKey, ...) for a row the
// keyring cannot open; on any error the batches already committed stay
// committed and the old keys stay in the keyring.
func (s *Store) RotateKey(ctx context.Context, newKey seal.Key, batch int, progress func(RotationProgress)) error {
	if newKey == (seal.Key{}) {
		return fmt.Errorf("store: rotate key: %w: zero key", store.ErrInvalidArgument)
	}
	if batch < 1 {
		return fmt.Errorf("store: rotate key: %w: batch %d below 1", store.ErrInvalidArgument, batch)
	}
	rotateMu.Lock()
	defer rotateMu.Unlock()

	// The sealer holds only newKey, so every re-sealed value carries its id
	// whatever happens to the store's keyring meanwhile.
	sealer, err := seal.NewKeyring(newKey)
	if err != nil {
		return fmt.Errorf("store: rotate key: %w", err)
	}
	if err := s.recordRotationKey(ctx, sealer, newKey.ID()); err != nil {
		return fmt.Errorf("store: rotate key: %w", err)
	}
	// Wait for writes that sealed with the old key to end; every write
	// after this seals with newKey.
	s.sealMu.Lock()
	s.keys.Add(newKey)
	s.sealMu.Unlock()

	for pass := 1; ; pass++ {
		resealed := int64(0)
		for _, table := range rotationTables {
			n, err := s.resealTable(ctx, table, sealer, batch, pass, progress)
			if err != nil {
				return fmt.Errorf("store: rotate key: %s: %w", table, err)
			}
			resealed += n
		}
		if resealed == 0 {
			break
		}
		if pass == maxRotationPasses {
			return fmt.Errorf("store: rotate key: %d rows were still under another key after %d passes", resealed, pass)
		}
	}

	if err := s.finishRotation(ctx, newKey.ID()); err != nil {
		return fmt.Errorf("store: rotate key: %w", err)
	}
	return nil
}

// recordRotationKey records newID as the active key, with a verifier
// sealed by sealer, and every other key as retiring.
func (s *Store) recordRotationKey(ctx context.Context, sealer *seal.Keyring, newID seal.KeyID) error {
	verifier, err := sealer.Seal(seal.RecordKeyVerifier, verifierAD(newID), []byte(verifierText))
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(q *db.Queries) error {
		rows, err := q.ListStorageKeys(ctx)
		if err != nil {
			return fmt.Errorf("read storage keys: %w", err)
		}
		found := false
		for _, r := range rows {
			if seal.KeyID(r.KeyID) != newID {
				if r.State != "retiring" {
					if err := q.SetStorageKeyState(ctx, db.SetStorageKeyStateParams{State: "retiring", KeyID: r.KeyID}); err != nil {
						return fmt.Errorf("retire storage key %d: %w", r.KeyID, err)
					}
				}
				continue
			}
			found = true
			if r.State != "active" {
				if err := q.SetStorageKeyState(ctx, db.SetStorageKeyStateParams{State: "active", KeyID: r.KeyID}); err != nil {
					return fmt.Errorf("activate storage key %d: %w", r.KeyID, err)
				}
			}
			if h, err := seal.Parse(r.Verifier); err != nil || h.KeyID != newID {
				if err := q.UpdateStorageKeyVerifier(ctx, db.UpdateStorageKeyVerifierParams{Verifier: verifier, KeyID: r.KeyID}); err != nil {
					return fmt.Errorf("storage key %d verifier: %w", r.KeyID, err)
				}
			}
		}
		if found {
			return nil
		}
		err = q.InsertStorageKey(ctx, db.InsertStorageKeyParams{KeyID: int64(newID), State: "active", Verifier: verifier, CreatedAt: time.Now().Unix()})
		if err != nil {
			return fmt.Errorf("record storage key %d: %w", newID, err)
		}
		return nil
	})
}

// finishRotation deletes every storage key row but newID's and makes the
// keyring forget every other key.
func (s *Store) finishRotation(ctx context.Context, newID seal.KeyID) error {
	err := s.withTx(ctx, func(q *db.Queries) error {
		rows, err := q.ListStorageKeys(ctx)
		if err != nil {
			return fmt.Errorf("read storage keys: %w", err)
		}
		for _, r := range rows {
			if seal.KeyID(r.KeyID) == newID {
				continue
			}
			if err := q.DeleteStorageKey(ctx, r.KeyID); err != nil {
				return fmt.Errorf("delete storage key %d: %w", r.KeyID, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range s.keys.KeyIDs() {
		if id == newID {
			continue
		}
		if err := s.keys.Forget(id); err != nil {
			return err
		}
	}
	return nil
}

// sealedRow is one sealed value found by a rotation batch, with what it
// takes to open it and write it back.
type sealedRow struct {
	what   string // row identity, for errors
	rt     seal.RecordType
	ad     []byte
	sealed []byte
	update func(ctx context.Context, q *db.Queries, sealed []byte) error
}

// rotationWalker walks one table in key order, batch by batch. batch
// returns up to limit rows after the walker's cursor and advances it.
type rotationWalker struct {
	count func(ctx context.Context, q *db.Queries) (int64, error)
	batch func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error)
}

// resealTable walks table once, re-sealing with sealer every row not
// already under its key, and returns how many it re-sealed.
func (s *Store) resealTable(ctx context.Context, table string, sealer *seal.Keyring, batch, pass int, progress func(RotationProgress)) (int64, error) {
	w, err := newRotationWalker(table)
	if err != nil {
		return 0, err
	}
	newID := sealer.Current()
	p := RotationProgress{Table: table, Pass: pass}
	first := true
	for {
		var n, resealed int64
		err := s.withTx(ctx, func(q *db.Queries) error {
			if first {
				total, err := w.count(ctx, q)
				if err != nil {
					return fmt.Errorf("count rows: %w", err)
				}
				p.Total = total
			}
			rows, err := w.batch(ctx, q, int64(batch))
			if err != nil {
				return fmt.Errorf("read batch: %w", err)
			}
			n = int64(len(rows))
			for _, r := range rows {
				if h, err := seal.Parse(r.sealed); err == nil && h.KeyID == newID {
					continue
				}
				pt, err := s.keys.Open(r.rt, r.ad, r.sealed)
				if err != nil {
					return fmt.Errorf("%s: %w", r.what, err)
				}
				v, err := sealer.Seal(r.rt, r.ad, pt)
				clear(pt)
				if err != nil {
					return fmt.Errorf("%s: %w", r.what, err)
				}
				if err := r.update(ctx, q, v); err != nil {
					return fmt.Errorf("%s: write: %w", r.what, err)
				}
				resealed++
			}
			return nil
		})
		if err != nil {
			return p.Resealed, err
		}
		first = false
		p.Done += n
		p.Resealed += resealed
		if progress != nil {
			progress(p)
		}
		if n < int64(batch) {
			return p.Resealed, nil
		}
	}
}

func newRotationWalker(table string) (*rotationWalker, error) {
	switch table {
	case "local_identity":
		done := false
		return &rotationWalker{
			count: func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountLocalIdentityRows(ctx) },
			batch: func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
				if done {
					return nil, nil
				}
				row, err := q.GetLocalIdentity(ctx)
				if errors.Is(err, sql.ErrNoRows) {
					done = true
					return nil, nil
				}
				if err != nil {
					return nil, err
				}
				done = true
				addr := ids.DeviceAddress{UserID: row.UserID, DeviceID: row.DeviceID}
				return []sealedRow{{
					what: "local identity " + addr.String(), rt: seal.RecordLocalIdentity, ad: store.AddressAD(addr), sealed: row.Sealed,
					update: func(ctx context.Context, q *db.Queries, v []byte) error { return q.UpdateLocalIdentitySealed(ctx, v) },
				}}, nil
			},
		}, nil

	case "identity_pin":
		return addressWalker(seal.RecordIdentityPin,
			func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountIdentityPinRows(ctx) },
			func(ctx context.Context, q *db.Queries, after ids.DeviceAddress, limit int64) ([]addressRow, error) {
				return addressRows(q.SealedIdentityPinBatch(ctx, db.SealedIdentityPinBatchParams{AfterUserID: after.UserID, AfterDeviceID: after.DeviceID, RowLimit: limit}))
			},
			func(ctx context.Context, q *db.Queries, a ids.DeviceAddress, v []byte) error {
				return q.UpdateIdentityPinSealed(ctx, db.UpdateIdentityPinSealedParams{Sealed: v, UserID: a.UserID, DeviceID: a.DeviceID})
			}), nil

	case "session":
		return addressWalker(seal.RecordSession,
			func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountSessionRows(ctx) },
			func(ctx context.Context, q *db.Queries, after ids.DeviceAddress, limit int64) ([]addressRow, error) {
				return addressRows(q.SealedSessionBatch(ctx, db.SealedSessionBatchParams{AfterUserID: after.UserID, AfterDeviceID: after.DeviceID, RowLimit: limit}))
			},
			func(ctx context.Context, q *db.Queries, a ids.DeviceAddress, v []byte) error {
				return q.UpdateSessionSealed(ctx, db.UpdateSessionSealedParams{Sealed: v, UserID: a.UserID, DeviceID: a.DeviceID})
			}), nil

	case "session_initiation":
		return addressWalker(seal.RecordSessionInitiation,
			func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountSessionInitiationRows(ctx) },
			func(ctx context.Context, q *db.Queries, after ids.DeviceAddress, limit int64) ([]addressRow, error) {
				return addressRows(q.SealedSessionInitiationBatch(ctx, db.SealedSessionInitiationBatchParams{AfterUserID: after.UserID, AfterDeviceID: after.DeviceID, RowLimit: limit}))
			},
			func(ctx context.Context, q *db.Queries, a ids.DeviceAddress, v []byte) error {
				return q.UpdateSessionInitiationSealed(ctx, db.UpdateSessionInitiationSealedParams{Sealed: v, UserID: a.UserID, DeviceID: a.DeviceID})
			}), nil

	case "pending_outbound_message":
		return messageWalker(seal.RecordPendingOutbound, "pending outbound",
			func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountPendingOutbound(ctx) },
			func(ctx context.Context, q *db.Queries, from, limit int64) ([]messageModel, error) {
				rows, err := q.SealedPendingOutboundBatch(ctx, db.SealedPendingOutboundBatchParams{FromSequence: from, RowLimit: limit})
				out := make([]messageModel, len(rows))
				for i, r := range rows {
					out[i] = messageModel{r.Sequence, ids.DeviceAddress{UserID: r.RecipientUserID, DeviceID: r.RecipientDeviceID}, r.LogicalID, r.Sealed}
				}
				return out, err
			},
			func(ctx context.Context, q *db.Queries, seq int64, v []byte) error {
				return q.UpdatePendingOutboundSealed(ctx, db.UpdatePendingOutboundSealedParams{Sealed: v, Sequence: seq})
			}), nil

	case "pending_inbound_message":
		return messageWalker(seal.RecordPendingInbound, "pending inbound",
			func(ctx context.Context, q *db.Queries) (int64, error) { return q.CountPendingInboundRows(ctx) },
			func(ctx context.Context, q *db.Queries, from, limit int64) ([]messageModel, error) {
				rows, err := q.SealedPendingInboundBatch(ctx, db.SealedPendingInboundBatchParams{FromSequence: from, RowLimit: limit})
				out := make([]messageModel, len(rows))
				for i, r := range rows {
					out[i] = messageModel{r.Sequence, ids.DeviceAddress{UserID: r.SenderUserID, DeviceID: r.SenderDeviceID}, r.LogicalID, r.Sealed}
				}
				return out, err
			},
			func(ctx context.Context, q *db.Queries, seq int64, v []byte) error {
				return q.UpdatePendingInboundSealed(ctx, db.UpdatePendingInboundSealedParams{Sealed: v, Sequence: seq})
			}), nil

	case "storage_key":
		after := int64(-1)
		return &rotationWalker{
			count: func(ctx context.Context, q *db.Queries) (int64, error) {
				rows, err := q.ListStorageKeys(ctx)
				return int64(len(rows)), err
			},
			// storage_key holds a handful of rows: it is listed whole and
			// cut into batches here.
			batch: func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
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
						what: fmt.Sprintf("storage key %d verifier", keyID), rt: seal.RecordKeyVerifier,
						ad: verifierAD(seal.KeyID(keyID)), sealed: r.Verifier,
						update: func(ctx context.Context, q *db.Queries, v []byte) error {
							return q.UpdateStorageKeyVerifier(ctx, db.UpdateStorageKeyVerifierParams{Verifier: v, KeyID: keyID})
						},
					})
				}
				return out, nil
			},
		}, nil
	}
	return nil, fmt.Errorf("no rotation walker for table %q", table)
}

// addressRow is a row keyed by a device address (pin, session, initiation).
type addressRow struct {
	addr   ids.DeviceAddress
	sealed []byte
}

// addressModel is a generated row of a table keyed by (user_id,
// device_id) with one sealed column: the three share one shape.
type addressModel interface {
	db.IdentityPin | db.Session | db.SessionInitiation
}

// addressRows converts a batch of such rows (and its error, passed
// through) to addressRows.
func addressRows[T addressModel](rows []T, err error) ([]addressRow, error) {
	out := make([]addressRow, len(rows))
	for i, r := range rows {
		m := db.Session(r)
		out[i] = addressRow{ids.DeviceAddress{UserID: m.UserID, DeviceID: m.DeviceID}, m.Sealed}
	}
	return out, err
}

// addressWalker walks a table keyed by (user_id, device_id) in key order.
func addressWalker(
	rt seal.RecordType,
	count func(ctx context.Context, q *db.Queries) (int64, error),
	read func(ctx context.Context, q *db.Queries, after ids.DeviceAddress, limit int64) ([]addressRow, error),
	write func(ctx context.Context, q *db.Queries, a ids.DeviceAddress, v []byte) error,
) *rotationWalker {
	// User ids are never empty, so ("", -1) sorts before every row.
	after := ids.DeviceAddress{UserID: "", DeviceID: -1}
	return &rotationWalker{
		count: count,
		batch: func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
			rows, err := read(ctx, q, after, limit)
			if err != nil {
				return nil, err
			}
			out := make([]sealedRow, 0, len(rows))
			for _, r := range rows {
				after = r.addr
				addr := r.addr
				out = append(out, sealedRow{
					what: addr.String(), rt: rt, ad: store.AddressAD(addr), sealed: r.sealed,
					update: func(ctx context.Context, q *db.Queries, v []byte) error { return write(ctx, q, addr, v) },
				})
			}
			return out, nil
		},
	}
}

// messageRow describes a pending message row (outbound or inbound), bound
// to its remote device and logical id.
// messageModel is one row of a message table (pending outbound or
// inbound): its sequence, the remote device, the logical id and the
// sealed message.
type messageModel struct {
	seq       int64
	addr      ids.DeviceAddress
	logicalID []byte
	sealed    []byte
}

// messageWalker walks a message table keyed by sequence, in sequence
// order.
func messageWalker(
	rt seal.RecordType,
	kind string,
	count func(ctx context.Context, q *db.Queries) (int64, error),
	read func(ctx context.Context, q *db.Queries, from, limit int64) ([]messageModel, error),
	write func(ctx context.Context, q *db.Queries, seq int64, v []byte) error,
) *rotationWalker {
	// From the smallest sequence: only a damaged database holds one at or
	// below 0, and its rows must not stay under the old key.
	from, done := int64(math.MinInt64), false
	return &rotationWalker{
		count: count,
		batch: func(ctx context.Context, q *db.Queries, limit int64) ([]sealedRow, error) {
			if done {
				return nil, nil
			}
			rows, err := read(ctx, q, from, limit)
			if err != nil {
				return nil, err
			}
			out := make([]sealedRow, 0, len(rows))
			for _, r := range rows {
				if r.seq == math.MaxInt64 {
					done = true
				}
				from = r.seq + 1
				seq := r.seq
				row, err := messageRow(rt, kind, seq, r.addr, r.logicalID, r.sealed,
					func(ctx context.Context, q *db.Queries, v []byte) error { return write(ctx, q, seq, v) })
				if err != nil {
					return nil, err
				}
				out = append(out, row)
			}
			return out, nil
		},
	}
}

func messageRow(rt seal.RecordType, kind string, seq int64, addr ids.DeviceAddress, logicalID, sealed []byte,
	update func(ctx context.Context, q *db.Queries, v []byte) error,
) (sealedRow, error) {
	id, err := ids.ParseLogicalMessageID(logicalID)
	if err != nil {
		return sealedRow{}, fmt.Errorf("%s sequence %d: %w", kind, seq, err)
	}
	return sealedRow{
		what: fmt.Sprintf("%s sequence %d", kind, seq), rt: rt, ad: store.MessageAD(addr, id),
		sealed: sealed, update: update,
	}, nil
}
