package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// DefaultRotationBatch is the batch RotateKey uses when given 0: rows
// re-sealed per transaction. A batch holds the database's write lock while
// it opens, seals and writes its rows, so the client's sends wait behind
// it; a thousand rows keep that wait short (5 to 12 ms for 1,000 pending
// messages of 200 bytes on a shared two-core machine) while the cost of a
// commit and its sync is spread over many rows.
const DefaultRotationBatch = 1000

// maxRotationPasses bounds the walks over every table: the first re-seals,
// the second should find nothing left. A third pass that still finds rows
// under another key means something keeps sealing with it.
const maxRotationPasses = 3

// RotateKey replaces the storage key: every sealed value of the database
// ends up sealed with newKey, and the old keys are dropped.
//
// It records newKey in storage_key as 'active' (with a verifier sealed by
// it) and every other key as 'retiring', then adds newKey to the keyring,
// where it becomes the sealing key. It then re-seals every sealed row of
// every table with a sealed column (SECURITY.md lists them; the
// storage_key verifiers too), batch rows per transaction, in key order,
// calling progress
// after each committed batch. Rows already sealed with newKey
// are skipped without being opened, so a rotation interrupted by an error,
// a cancelled context or a crash is finished by calling RotateKey again
// with the same key (after a restart, open the store with a keyring
// holding both keys). The walk is repeated until a pass re-seals nothing.
// Finally the retiring rows are deleted from storage_key and every key but
// newKey is forgotten by the keyring.
//
// A row that does not open (altered, sealed with a key the keyring does
// not hold, a column of the wrong storage class) never stops the rotation: it is left exactly as it was and the walk goes on.
// The rotation then finishes as above and RotateKey returns a
// *RotationError listing the skipped rows of the last pass (errors.Is
// matches store.ErrRowsSkipped and each row's cause).
//
// Old keys are dropped only where that cannot make an openable row
// unreadable. A row that was opened under an old key has been re-sealed.
// A row that failed to open (a seal error: seal.ErrWrongKey, its key not
// in the keyring, or seal.ErrAuthentication and the others, under a key
// the keyring holds) was tried with every key held, so dropping keys
// cannot make it worse. A row with a column of the wrong storage class
// (store.ErrCorruptRow) is not re-sealed; if its value authenticates,
// under the old key its header names, as the row its columns spell
// (opened to check, the plaintext discarded), that key is kept (recorded
// retiring, held by the keyring, listed in RotationError.Kept); a header
// that does not authenticate keeps nothing. The application removes or
// repairs the rows (SkippedRow.Pending gives a pending row's entry, whose
// PendingMessage client.Client.AbandonPendingMessage removes) and
// runs RotateKey again with the same key, which re-seals nothing new,
// reports what is still skipped and drops the keys no corrupt row names
// any more. (A row that failed with seal.ErrAuthentication under a key
// since dropped reports seal.ErrWrongKey from then on.)
//
// Sequences, row identities and plaintexts do not change: a value is only
// opened and sealed again under the same record type and associated data.
//
// Writes may go on during a rotation: the store waits for writes that
// sealed with the old key to finish before it switches the sealing key, so
// none can land behind the walk. So may reads: the store waits for reads
// that may have read a value under an old key, and not opened it yet, to
// finish before it forgets that key.
//
// batch is the number of rows re-sealed per transaction
// (DefaultRotationBatch if 0). progress, if not nil, is called on the
// goroutine calling RotateKey after every committed batch that walked
// rows and, if that one was not at Done == Total, once at the end, with
// the progress of the whole rotation (see RotationProgress).
//
// It returns an error wrapping store.ErrInvalidArgument for a zero key, a
// key whose id the keyring holds for another key (with seal.ErrKey: see
// seal.Keyring.CheckAdd; nothing is recorded) or a negative batch, a
// *RotationError as above, and storage errors or the
// context's error; on a storage or context error the batches already
// committed stay committed and the old keys stay in the keyring.
func (s *Store) RotateKey(ctx context.Context, newKey seal.Key, batch int, progress func(store.RotationProgress)) error {
	if err := s.rotateKey(ctx, newKey, batch, progress); err != nil {
		return storeimpl.OpRotateKey.Wrap(err)
	}
	return nil
}

// rotateKey is RotateKey, its errors not yet in the call's context.
func (s *Store) rotateKey(ctx context.Context, newKey seal.Key, batch int, progress func(store.RotationProgress)) error {
	if newKey == (seal.Key{}) {
		return fmt.Errorf("%w: zero key", store.ErrInvalidArgument)
	}
	if batch < 0 {
		return fmt.Errorf("%w: negative batch %d", store.ErrInvalidArgument, batch)
	}
	if batch == 0 {
		batch = DefaultRotationBatch
	}
	s.rotateMu.Lock()
	defer s.rotateMu.Unlock()
	// Under rotateMu, so that no other rotation adds a key meanwhile: a
	// key sharing its id with a held one would pass every row under that
	// key for re-sealed and replace the key that opens them.
	if err := s.keys.CheckAdd(newKey); err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	}

	// The sealer holds only newKey, so every re-sealed value carries its id
	// whatever happens to the store's keyring meanwhile.
	sealer, err := seal.NewKeyring(newKey)
	if err != nil {
		return err
	}
	if err := s.recordRotationKey(ctx, sealer, newKey.ID()); err != nil {
		return err
	}
	// Wait for writes that sealed with the old key to end; every write
	// after this seals with newKey.
	s.sealMu.Lock()
	err = s.keys.Add(newKey) // checked above; only Forget changes the keyring meanwhile
	s.sealMu.Unlock()
	if err != nil {
		return err
	}

	tally := &rotationTally{report: progress}
	if progress != nil {
		rows, err := s.countSealedRows(ctx)
		if err != nil {
			return err
		}
		tally.p.Total = 2 * rows
	}

	// skipped holds the last pass's skipped rows: a row skipped by an
	// earlier pass and deleted since is no longer reported.
	var skipped []store.SkippedRow
	for pass := 1; ; pass++ {
		resealed := int64(0)
		skipped = nil
		for _, t := range sealedTables {
			n, sk, err := s.resealTable(ctx, t, sealer, batch, pass, tally)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			resealed += n
			if t.reportSkipped {
				skipped = append(skipped, sk...)
			}
		}
		if resealed == 0 {
			break
		}
		if pass == maxRotationPasses {
			return fmt.Errorf("%d rows were still under another key after %d passes", resealed, pass)
		}
	}

	kept, err := s.finishRotation(ctx, newKey.ID(), skipped)
	if err != nil {
		return err
	}
	tally.finish()
	if len(skipped) > 0 {
		return &store.RotationError{Skipped: skipped, Kept: kept}
	}
	return nil
}

// recordRotationKey records newID as the active key, with a verifier
// sealed by sealer, and every other key as retiring. The verifier is
// marked (storeimpl.KeyVerifierSealedQueue): an open store's pending queue is
// sealed. The old keys' verifiers are re-sealed by the walk with the text
// they hold, mark included.
func (s *Store) recordRotationKey(ctx context.Context, sealer *seal.Keyring, newID seal.KeyID) error {
	// sealer holds newID's key alone: the verifier is newID's.
	_, verifier, err := storeimpl.SealKeyVerifier(sealer, []byte(storeimpl.KeyVerifierSealedQueue))
	if err != nil {
		return err
	}
	return s.tx(ctx, transaction, func(q *txn) error {
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
// keyring forget every other key, except the keys of a skipped row whose
// columns are corrupt but whose value authenticates under that key
// (dropping one would make that row unreadable for good; a row that was
// tried and failed cannot get worse): their rows stay, retiring, and the
// keyring keeps them. It returns the old key ids kept, ascending.
func (s *Store) finishRotation(ctx context.Context, newID seal.KeyID, skipped []store.SkippedRow) ([]seal.KeyID, error) {
	named := map[seal.KeyID]bool{} // keys a skipped row is sealed with
	for _, r := range skipped {
		if r.Authentic && r.SealedWith != newID && errors.Is(r.Cause, store.ErrCorruptRow) {
			named[r.SealedWith] = true
		}
	}
	keptSet := map[seal.KeyID]bool{}
	err := s.tx(ctx, transaction, func(q *txn) error {
		rows, err := q.ListStorageKeys(ctx)
		if err != nil {
			return fmt.Errorf("read storage keys: %w", err)
		}
		for _, r := range rows {
			if seal.KeyID(r.KeyID) == newID {
				continue
			}
			if named[seal.KeyID(r.KeyID)] {
				keptSet[seal.KeyID(r.KeyID)] = true
				continue
			}
			if err := q.DeleteStorageKey(ctx, r.KeyID); err != nil {
				return fmt.Errorf("delete storage key %d: %w", r.KeyID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Exclusively: a read opens what it read under sealMu shared (tx), and
	// may have read a value before the walk re-sealed it.
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	for _, id := range s.keys.KeyIDs() {
		if id == newID {
			continue
		}
		if named[id] {
			keptSet[id] = true
			continue
		}
		if err := s.keys.Forget(id); err != nil {
			return nil, err
		}
	}
	kept := make([]seal.KeyID, 0, len(keptSet))
	for id := range keptSet {
		kept = append(kept, id)
	}
	slices.Sort(kept)
	return kept, nil
}

// sealedRow is one sealed value found by a rotation batch, with what it
// takes to open it and write it back.
type sealedRow struct {
	id     store.SkippedRow // the row's identity, reported if it is skipped
	bad    error            // set if the row's columns do not decode: skipped with this cause
	rt     seal.RecordType
	ad     []byte
	sealed []byte
	update func(ctx context.Context, q *db.Queries, sealed []byte) error
}

// skip returns r reported as skipped for cause.
func (r sealedRow) skip(cause error) store.SkippedRow {
	sk := r.id
	sk.Cause = cause
	if h, err := seal.Parse(r.sealed); err == nil {
		sk.SealedWith, sk.HasHeader = h.KeyID, true
	}
	return sk
}

// skipCorrupt returns r, whose columns do not decode, reported as skipped
// for r.bad, Authentic if its value opens under an old key its header
// names with the associated data its columns spell as far as they decode.
// The plaintext is discarded: the row is neither returned nor re-sealed.
func (r sealedRow) skipCorrupt(keys seal.Sealer, newID seal.KeyID) store.SkippedRow {
	sk := r.skip(r.bad)
	if !sk.HasHeader || sk.SealedWith == newID {
		return sk
	}
	if pt, err := keys.Open(r.rt, r.ad, r.sealed); err == nil {
		clear(pt)
		sk.Authentic = true
	}
	return sk
}

// rotationTally is the progress of a whole rotation, reported to report
// (if not nil).
type rotationTally struct {
	p      store.RotationProgress
	report func(store.RotationProgress)
}

// batch records a committed batch of table in pass: n rows visited,
// resealed of them re-sealed, skipped left as they were.
func (t *rotationTally) batch(table string, pass int, n, resealed, skipped int64) {
	t.p.Table, t.p.Pass = table, pass
	t.p.Done += n
	t.p.Resealed += resealed
	t.p.Skipped += skipped
	t.p.Total = max(t.p.Total, t.p.Done)
	// A batch that found no row (a table's end, after a full batch)
	// reports nothing new.
	if t.report != nil && n > 0 {
		t.report(t.p)
	}
}

// finish sends the last report, Done == Total, unless the last batch's
// already was.
func (t *rotationTally) finish() {
	if t.report == nil || t.p.Total == t.p.Done {
		return
	}
	t.p.Total = t.p.Done
	t.report(t.p)
}

// countSealedRows counts the rows of every table a rotation walks, in one
// transaction.
func (s *Store) countSealedRows(ctx context.Context) (int64, error) {
	var rows int64
	err := s.tx(ctx, transaction, func(q *txn) error {
		for _, t := range sealedTables {
			n, err := t.count(ctx, q.Queries)
			if err != nil {
				return fmt.Errorf("%s: count rows: %w", t.name, err)
			}
			rows += n
		}
		return nil
	})
	return rows, err
}

// resealTable walks table once, re-sealing with sealer every row not
// already under its key, and returns how many it re-sealed and the rows it
// skipped: rows that do not decode or do not open are left untouched.
// Each committed batch is recorded in tally.
func (s *Store) resealTable(ctx context.Context, t sealedTable, sealer *seal.Keyring, batch, pass int, tally *rotationTally) (int64, []store.SkippedRow, error) {
	next := t.walk()
	newID := sealer.Current()
	var total int64
	var skipped []store.SkippedRow
	for {
		var n, resealed int64
		var sk []store.SkippedRow
		err := s.tx(ctx, transaction, func(q *txn) error {
			rows, err := next(ctx, q.Queries, int64(batch))
			if err != nil {
				return fmt.Errorf("read batch: %w", err)
			}
			n = int64(len(rows))
			for _, r := range rows {
				if r.bad != nil {
					sk = append(sk, r.skipCorrupt(s.keys, newID))
					continue
				}
				if h, err := seal.Parse(r.sealed); err == nil && h.KeyID == newID {
					continue
				}
				pt, err := s.keys.Open(r.rt, r.ad, r.sealed)
				if err != nil {
					// Left as it is: one damaged row must not stop the
					// others from moving to the new key.
					sk = append(sk, r.skip(err))
					continue
				}
				v, err := sealer.Seal(r.rt, r.ad, pt)
				clear(pt)
				if err != nil {
					return fmt.Errorf("%s: %w", r.id, err)
				}
				if err := r.update(ctx, q.Queries, v); err != nil {
					return fmt.Errorf("%s: write: %w", r.id, err)
				}
				resealed++
			}
			return nil
		})
		if err != nil {
			return total, nil, err
		}
		total += resealed
		skipped = append(skipped, sk...)
		tally.batch(t.name, pass, n, resealed, int64(len(sk)))
		if n < int64(batch) {
			return total, skipped, nil
		}
	}
}
