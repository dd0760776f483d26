package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/rowseal"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// RotationProgress reports how far a storage key rotation has gone, over
// the whole rotation: every table, both walks (the one that re-seals and
// the one that confirms). RotateKey sends one after every batch
// transaction has committed, and a last one when it has finished.
//
// Done/Total is a progress bar's fraction: Done never decreases, the
// fraction never goes back, and the last report of a rotation that
// finishes (with or without skipped rows) has Done == Total, the only one
// that does unless the walk ran past its count. Rows written or deleted
// during the rotation make the walk longer or shorter than counted: Total
// is then raised to Done while the walk runs past it (the bar waits at its
// end) and set to Done in the last report.
type RotationProgress struct {
	// Done is the number of row visits so far: each walk visits every
	// row of every table once (re-sealed, found already under the new
	// key, or skipped).
	Done int64
	// Total is the number of visits the rotation expects: twice (one
	// re-sealing walk, one confirming walk) the rows of every table
	// counted when it started, adjusted as described above.
	Total int64
	// Resealed is the number of rows re-sealed so far; Done - Resealed -
	// Skipped visits found a row already under the new key.
	Resealed int64
	// Skipped is the number of visits so far that found a row the
	// rotation could not open and left as it was (see SkippedRow). Each
	// walk visits such a row again, so each counts it again; RotationError
	// lists the rows themselves.
	Skipped int64
	// Table is the table of the batch just committed.
	Table string
	// Pass counts the walks over every table, from 1. The walk is repeated
	// until a pass re-seals nothing, so the last pass only confirms (and a
	// third pass, which only happens if something wrote under an old key
	// behind the walk, runs past Total).
	Pass int
}

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

// ErrRowsSkipped means a key rotation finished but left rows it could not
// open as they were. It is matched by the *RotationError RotateKey
// returns, which lists them.
var ErrRowsSkipped = errors.New("store: key rotation skipped rows it could not open")

// SkippedRow is a row a key rotation could not open, or whose columns hold
// values the schema never stores, and therefore left byte for byte as it
// was: it is neither re-sealed nor deleted.
type SkippedRow struct {
	// Table is the row's table, one of those RotateKey walks but
	// storage_key (a verifier that does not open is not reported: it is
	// left as it is and goes with its key, deleted when the key is
	// dropped).
	Table string
	// Address is the row's device: the peer of an identity_pin, session or
	// session_initiation row, the recipient of a pending_outbound_message
	// row, the sender of a pending_inbound_message row, this device for
	// local_identity. As stored, as far as it decodes.
	Address ids.DeviceAddress
	// Sequence and ID identify a pending_outbound_message or
	// pending_inbound_message row (ID zero if it does not decode).
	Sequence int64
	ID       ids.LogicalMessageID
	// SealedWith is the key id the sealed value's header names, if
	// HasHeader (the header parses).
	SealedWith seal.KeyID
	HasHeader  bool
	// Authentic is set for a row skipped with store.ErrCorruptRow whose
	// sealed value authenticates under the key its header names as the
	// row its columns spell (checked, never returned): only such a row
	// keeps that key (RotationError.Kept).
	Authentic bool
	// Cause says why the row was skipped. It matches, with errors.Is, a
	// seal error (seal.ErrWrongKey: sealed with a key the keyring does not
	// hold; seal.ErrAuthentication: altered or moved; seal.ErrTruncated,
	// seal.ErrMalformed, seal.ErrUnknownVersion, seal.ErrRecordType) or
	// store.ErrCorruptRow (a column of the wrong storage class, or a
	// pending row's logical id of the wrong length).
	Cause error
}

// Pending returns a skipped pending_outbound_message row as the unreadable
// entry that store.Pending.AbandonPendingSequence (by Sequence),
// AbandonPending (by Recipient and ID) and client.AbandonUnreadable take;
// false for rows of other tables.
func (r SkippedRow) Pending() (store.UnreadablePendingMessage, bool) {
	if r.Table != "pending_outbound_message" {
		return store.UnreadablePendingMessage{}, false
	}
	return store.UnreadablePendingMessage{Sequence: r.Sequence, Recipient: r.Address, ID: r.ID, Cause: r.Cause}, true
}

// String names the row: its table and identity.
func (r SkippedRow) String() string {
	switch r.Table {
	case "pending_outbound_message", "pending_inbound_message":
		return fmt.Sprintf("%s sequence %d (%s, %s)", r.Table, r.Sequence, r.Address, r.ID)
	case "storage_key":
		return "storage_key verifier"
	}
	return fmt.Sprintf("%s %s", r.Table, r.Address)
}

// RotationError is the error of a key rotation that finished but skipped
// rows: every other row is under the new key, which is the active one.
// errors.Is matches ErrRowsSkipped and each skipped row's cause; errors.As
// gives the rows.
type RotationError struct {
	// Skipped are the rows left as they were, in walk order: table by
	// table in RotateKey's order, in key order within a table.
	Skipped []SkippedRow
	// Kept are the old keys the rotation did not drop, ascending: the keys
	// of the skipped rows whose cause is store.ErrCorruptRow and whose
	// sealed value authenticates under the key its header names
	// (SkippedRow.Authentic). Such a row is not re-sealed (its columns are
	// not believed), but its value is intact and opens once the row is
	// repaired; dropping its key would make it unreadable for good. A
	// header alone, which anyone can write, keeps no key. A
	// kept key stays recorded as retiring and held by the keyring until
	// the rows naming it are removed (or repaired) and RotateKey runs
	// again.
	Kept []seal.KeyID
}

// rotationErrorRows is how many skipped rows RotationError.Error names;
// Skipped holds them all.
const rotationErrorRows = 10

// Error names the kept keys and the first skipped rows (all are in
// Skipped), so that a database with many damaged rows gives a message of
// bounded length.
func (e *RotationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d skipped", ErrRowsSkipped, len(e.Skipped))
	if len(e.Kept) > 0 {
		fmt.Fprintf(&b, ", old keys %v kept", e.Kept)
	}
	for _, r := range e.Skipped[:min(len(e.Skipped), rotationErrorRows)] {
		fmt.Fprintf(&b, "; %s: %v", r, r.Cause)
	}
	if n := len(e.Skipped) - rotationErrorRows; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return b.String()
}

// Unwrap returns ErrRowsSkipped and every skipped row's cause.
func (e *RotationError) Unwrap() []error {
	out := make([]error, 0, len(e.Skipped)+1)
	out = append(out, ErrRowsSkipped)
	for _, r := range e.Skipped {
		out = append(out, r.Cause)
	}
	return out
}

// RotateKey replaces the storage key: every sealed value of the database
// ends up sealed with newKey, and the old keys are dropped.
//
// It records newKey in storage_key as 'active' (with a verifier sealed by
// it) and every other key as 'retiring', then adds newKey to the keyring,
// where it becomes the sealing key. It then re-seals every sealed row of
// every table (local_identity, identity_pin, session, session_initiation,
// pending_outbound_message, pending_inbound_message and the storage_key
// verifiers), batch rows per transaction, in key order, calling progress
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
// matches ErrRowsSkipped and each row's cause).
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
// repairs the rows (SkippedRow.Pending gives a pending row's entry for
// AbandonPendingSequence, AbandonPending or client.AbandonUnreadable) and
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
// none can land behind the walk.
//
// batch is the number of rows re-sealed per transaction
// (DefaultRotationBatch if 0). progress, if not nil, is called on the
// goroutine calling RotateKey after every committed batch that walked
// rows and, if that one was not at Done == Total, once at the end, with
// the progress of the whole rotation (see RotationProgress).
//
// It returns an error wrapping store.ErrInvalidArgument for a zero key or
// a negative batch, a *RotationError as above, and storage errors or the
// context's error; on a storage or context error the batches already
// committed stay committed and the old keys stay in the keyring.
func (s *Store) RotateKey(ctx context.Context, newKey seal.Key, batch int, progress func(RotationProgress)) error {
	if newKey == (seal.Key{}) {
		return fmt.Errorf("store: rotate key: %w: zero key", store.ErrInvalidArgument)
	}
	if batch < 0 {
		return fmt.Errorf("store: rotate key: %w: negative batch %d", store.ErrInvalidArgument, batch)
	}
	if batch == 0 {
		batch = DefaultRotationBatch
	}
	// Two rotations of one database at once would fight over which key
	// is active; the store holds its file alone, so its lock is the
	// database's.
	s.rotateMu.Lock()
	defer s.rotateMu.Unlock()

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

	tally := &rotationTally{report: progress}
	if progress != nil {
		rows, err := s.countSealedRows(ctx)
		if err != nil {
			return fmt.Errorf("store: rotate key: %w", err)
		}
		tally.p.Total = 2 * rows
	}

	// skipped holds the last pass's skipped rows: a row skipped by an
	// earlier pass and deleted since is no longer reported.
	var skipped []SkippedRow
	for pass := 1; ; pass++ {
		resealed := int64(0)
		skipped = nil
		for _, t := range sealedTables {
			n, sk, err := s.resealTable(ctx, t, sealer, batch, pass, tally)
			if err != nil {
				return fmt.Errorf("store: rotate key: %s: %w", t.name, err)
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
			return fmt.Errorf("store: rotate key: %d rows were still under another key after %d passes", resealed, pass)
		}
	}

	kept, err := s.finishRotation(ctx, newKey.ID(), skipped)
	if err != nil {
		return fmt.Errorf("store: rotate key: %w", err)
	}
	tally.finish()
	if len(skipped) > 0 {
		return &RotationError{Skipped: skipped, Kept: kept}
	}
	return nil
}

// recordRotationKey records newID as the active key, with a verifier
// sealed by sealer, and every other key as retiring. The verifier is
// marked (store.KeyVerifierSealedQueue): an open store's pending queue is
// sealed. The old keys' verifiers are re-sealed by the walk with the text
// they hold, mark included.
func (s *Store) recordRotationKey(ctx context.Context, sealer *seal.Keyring, newID seal.KeyID) error {
	// sealer holds newID's key alone: the verifier is newID's.
	_, verifier, err := rowseal.SealKeyVerifier(sealer, []byte(store.KeyVerifierSealedQueue))
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
// keyring forget every other key, except the keys of a skipped row whose
// columns are corrupt but whose value authenticates under that key
// (dropping one would make that row unreadable for good; a row that was
// tried and failed cannot get worse): their rows stay, retiring, and the
// keyring keeps them. It returns the old key ids kept, ascending.
func (s *Store) finishRotation(ctx context.Context, newID seal.KeyID, skipped []SkippedRow) ([]seal.KeyID, error) {
	named := map[seal.KeyID]bool{} // keys a skipped row is sealed with
	for _, r := range skipped {
		if r.Authentic && r.SealedWith != newID && errors.Is(r.Cause, store.ErrCorruptRow) {
			named[r.SealedWith] = true
		}
	}
	keptSet := map[seal.KeyID]bool{}
	err := s.withTx(ctx, func(q *db.Queries) error {
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
	id     SkippedRow // the row's identity, reported if it is skipped
	bad    error      // set if the row's columns do not decode: skipped with this cause
	rt     seal.RecordType
	ad     []byte
	sealed []byte
	update func(ctx context.Context, q *db.Queries, sealed []byte) error
}

// skip returns r reported as skipped for cause.
func (r sealedRow) skip(cause error) SkippedRow {
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
func (r sealedRow) skipCorrupt(keys *seal.Keyring, newID seal.KeyID) SkippedRow {
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
	p      RotationProgress
	report func(RotationProgress)
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
	err := s.withTx(ctx, func(q *db.Queries) error {
		for _, t := range sealedTables {
			n, err := t.count(ctx, q)
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
func (s *Store) resealTable(ctx context.Context, t sealedTable, sealer *seal.Keyring, batch, pass int, tally *rotationTally) (int64, []SkippedRow, error) {
	next := t.walk()
	newID := sealer.Current()
	var total int64
	var skipped []SkippedRow
	for {
		var n, resealed int64
		var sk []SkippedRow
		err := s.withTx(ctx, func(q *db.Queries) error {
			rows, err := next(ctx, q, int64(batch))
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
				if err := r.update(ctx, q, v); err != nil {
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
