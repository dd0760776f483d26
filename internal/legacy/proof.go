package legacy

// Step 1 and its proof: setting the legacy rows aside, the digest of the
// rows that the storage key verifier seals, and checking it on resume.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// begin is step 1, on a legacy layout: it refuses a database whose
// pending queue was sealed (mayBegin), sets the legacy table aside (its
// sqlite_sequence mark and its index go with it), erases the malformed
// rows, creates the sealed table and records the key (or gives the
// recorded one a new verifier) with the proof naming the rows set aside.
func (m *migrator) begin(ctx context.Context, tx *sql.Tx, q *legacydb.Queries) error {
	record, err := m.mayBegin(ctx, q)
	if err != nil {
		return err
	}
	if err := belowLayout(ctx, tx); err != nil {
		return err
	}
	if err := checkSequences(ctx, q); err != nil {
		return err
	}
	m.erased = nil
	if err := execStep(ctx, tx, stepSetAside); err != nil {
		return err
	}
	sum, n, err := m.scanRows(ctx, q, true)
	if err != nil {
		return err
	}
	// Each check erases in sequence order; the report is in one order.
	slices.SortFunc(m.erased, func(a, b store.ErasedLegacyRow) int { return cmp.Compare(a.Sequence, b.Sequence) })
	if err := execStep(ctx, tx, stepCreateSealed); err != nil {
		return err
	}
	if record {
		id, v, err := storeimpl.SealKeyVerifier(m.keys, proofText(sum))
		if err != nil {
			return fmt.Errorf("seal the migration's proof: %w", err)
		}
		if err := q.InsertStorageKey(ctx, legacydb.InsertStorageKeyParams{KeyID: int64(id), Verifier: v, CreatedAt: time.Now().Unix()}); err != nil {
			return fmt.Errorf("record storage key: %w", err)
		}
	} else if err := m.setVerifier(ctx, q, proofText(sum)); err != nil {
		return err
	}
	m.began = true
	m.next, m.end, m.sealed, m.total = math.MinInt64, false, 0, n
	return nil
}

// resume checks the proof of a migration under way: the active storage
// key record of the keyring's current key, with a verifier that opens and
// names exactly the rows of the set-aside table. Only a holder of the key
// can write that verifier, so the other tables (sealed before the pending
// queue in a legacy database, or not) need no check.
func (m *migrator) resume(ctx context.Context, tx *sql.Tx, q *legacydb.Queries) error {
	if err := m.checkProof(ctx, q); err != nil {
		return err
	}
	if err := belowLayout(ctx, tx); err != nil {
		return err
	}
	done, err := q.SealedPendingProgress(ctx)
	if err != nil {
		return fmt.Errorf("read the sealed rows: %w", err)
	}
	m.next, m.end = math.MinInt64, false
	if done.Sealed > 0 {
		m.next, m.end = following(done.MaxSequence)
	}
	left, err := m.left(ctx, q)
	if err != nil {
		return err
	}
	m.sealed, m.total = done.Sealed, done.Sealed+left
	return nil
}

// checkProof checks, reading only, the proof of a migration under way
// (see resume): store.ErrPlaintextRefused without one, or for rows other
// than the ones set aside; store.ErrKeyNotRecorded if the keyring's
// current key is not the recorded one; the seal error if its verifier
// does not open.
func (m *migrator) checkProof(ctx context.Context, q *legacydb.Queries) error {
	keys, err := q.StorageKeys(ctx)
	if err != nil {
		return fmt.Errorf("read storage keys: %w", err)
	}
	var (
		k      legacydb.StorageKeysRow
		found  bool
		active []int64
	)
	for _, r := range keys {
		if r.State != "active" {
			continue
		}
		active = append(active, r.KeyID)
		if r.KeyID == int64(m.keys.Current()) {
			k, found = r, true
		}
	}
	if len(active) == 0 {
		return refused(setAside, fmt.Sprintf("no proof that this library set it aside (%d storage key records, none active)", len(keys)))
	}
	if !found {
		return fmt.Errorf("%w: current key %d, recorded %v", store.ErrKeyNotRecorded, m.keys.Current(), active)
	}
	text, err := storeimpl.OpenKeyVerifier(m.keys, seal.KeyID(k.KeyID), k.Verifier)
	if err != nil {
		return fmt.Errorf("storage key %d: %w", k.KeyID, err)
	}
	want, ok := proofSum(text)
	if !ok {
		return refused(setAside, "no proof that this library set it aside with this key")
	}
	sum, _, err := m.scanRows(ctx, q, false)
	if err != nil {
		return err
	}
	if sum != want {
		return refused(setAside, "its rows are not the rows that were set aside")
	}
	return nil
}

// left returns the number of set-aside rows not yet sealed.
func (m *migrator) left(ctx context.Context, q *legacydb.Queries) (int64, error) {
	if m.end {
		return 0, nil
	}
	n, err := q.LegacyPendingCountFrom(ctx, m.next)
	if err != nil {
		return 0, fmt.Errorf("count legacy rows: %w", err)
	}
	return n, nil
}

// proofTag separates the verifier's known value from the digest of the
// rows set aside while a migration is under way.
const proofTag = "\x00legacy migration rows\x00"

func proofText(sum [sha256.Size]byte) []byte {
	return append([]byte(storeimpl.KeyVerifierText+proofTag), sum[:]...)
}

// proofSum returns the digest a verifier's plaintext carries, if it is a
// migration's proof.
func proofSum(text []byte) (sum [sha256.Size]byte, ok bool) {
	rest, found := strings.CutPrefix(string(text), storeimpl.KeyVerifierText+proofTag)
	if !found || len(rest) != sha256.Size {
		return sum, false
	}
	copy(sum[:], rest)
	return sum, true
}

// rowsDigest is the SHA-256 of the set-aside rows, in sequence order, each
// column length-prefixed or fixed-size: what the proof names.
type rowsDigest struct{ h hash.Hash }

func newRowsDigest() rowsDigest {
	d := rowsDigest{sha256.New()}
	d.h.Write([]byte("securemsg legacy migration rows v1\x00"))
	return d
}

func (d rowsDigest) add(seq int64, to store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) {
	b := binary.BigEndian.AppendUint64(nil, uint64(seq))
	b = binary.AppendUvarint(b, uint64(len(to.UserID)))
	b = append(b, to.UserID...)
	b = binary.BigEndian.AppendUint64(b, uint64(to.DeviceID))
	b = append(b, id[:]...)
	b = binary.AppendUvarint(b, uint64(len(plaintext)))
	d.h.Write(b)
	d.h.Write(plaintext)
}

func (d rowsDigest) sum() (s [sha256.Size]byte) {
	copy(s[:], d.h.Sum(nil))
	return s
}

// The storage class each legacy column must have.
var wantClass = [...]struct{ column, class string }{
	{"recipient_user_id", "text"}, {"recipient_device_id", "integer"}, {"logical_id", "blob"}, {"plaintext", "blob"},
}

func classReason(r legacydb.LegacyPendingShapeBatchRow) error {
	for i, got := range []string{r.UserClass, r.DeviceClass, r.LogicalIDClass, r.PlaintextClass} {
		if w := wantClass[i]; got != w.class {
			return fmt.Errorf("%w: %s is %s, want %s", store.ErrCorruptRow, w.column, strings.ToUpper(got), strings.ToUpper(w.class))
		}
	}
	return nil
}

// scanRows reads every set-aside row, storage classes first and then
// values, and returns the digest of the well-formed rows and their count.
// With erase (step 1), a malformed row is deleted and listed in m.erased;
// without (a resumed migration, whose rows were all checked when set
// aside), it is refused.
func (m *migrator) scanRows(ctx context.Context, q *legacydb.Queries, erase bool) ([sha256.Size]byte, int64, error) {
	bad := func(seq int64, reason error) error {
		if !erase {
			return refused(setAside, fmt.Sprintf("sequence %d: %v", seq, reason))
		}
		if err := q.DeleteLegacyPending(ctx, seq); err != nil {
			return fmt.Errorf("erase legacy sequence %d: %w", seq, err)
		}
		m.erased = append(m.erased, store.ErasedLegacyRow{Sequence: seq, Reason: reason})
		return nil
	}
	for first, end := int64(math.MinInt64), false; !end; {
		rows, err := q.LegacyPendingShapeBatch(ctx, legacydb.LegacyPendingShapeBatchParams{FirstSequence: first, RowLimit: shapeChunk})
		if err != nil {
			return [sha256.Size]byte{}, 0, fmt.Errorf("read legacy rows: %w", err)
		}
		for _, r := range rows {
			first, end = following(r.Sequence)
			if reason := classReason(r); reason != nil {
				if err := bad(r.Sequence, reason); err != nil {
					return [sha256.Size]byte{}, 0, err
				}
			}
		}
		if len(rows) < shapeChunk {
			break
		}
	}
	sum, n, err := m.digestRows(ctx, q, bad)
	if err != nil || !erase {
		return sum, n, err
	}
	// The sealed table holds one message per recipient and logical id:
	// the first row keeps them, a later one (its plaintext too) is erased
	// like a malformed row, which would otherwise fail its batch on every
	// run. Then the digest again, without it.
	repeated, err := q.LegacyPendingRepeatedIdentity(ctx)
	if err != nil {
		return [sha256.Size]byte{}, 0, fmt.Errorf("read legacy rows: %w", err)
	}
	if len(repeated) == 0 {
		return sum, n, nil
	}
	for _, r := range repeated {
		reason := fmt.Errorf("legacy sequence %d: %w: %w: sequence %d has its recipient and logical id", r.Sequence, store.ErrCorruptRow, store.ErrDuplicate, r.FirstSequence)
		if err := bad(r.Sequence, reason); err != nil {
			return [sha256.Size]byte{}, 0, err
		}
	}
	return m.digestRows(ctx, q, bad)
}

// digestRows reads every set-aside row's values and returns the digest of
// the well-formed rows and their count, passing each malformed one to bad.
func (m *migrator) digestRows(ctx context.Context, q *legacydb.Queries, bad func(int64, error) error) ([sha256.Size]byte, int64, error) {
	d := newRowsDigest()
	var n int64
	for first, end := int64(math.MinInt64), false; !end; {
		rows, err := q.LegacyPendingBatch(ctx, legacydb.LegacyPendingBatchParams{FirstSequence: first, RowLimit: readChunk})
		if err != nil {
			return [sha256.Size]byte{}, 0, fmt.Errorf("read legacy rows: %w", err)
		}
		for _, r := range rows {
			first, end = following(r.Sequence)
			to, id, err := rowIdentity(r.Sequence, r.RecipientUserID, r.RecipientDeviceID, r.LogicalID)
			if err == nil && len(r.Plaintext) > store.MaxPlaintextSize {
				// The store refuses such a message on insert: sealed into
				// the queue, it would fail every retry to its recipient.
				err = fmt.Errorf("legacy sequence %d: %w: plaintext is %d bytes, limit %d", r.Sequence, store.ErrCorruptRow, len(r.Plaintext), store.MaxPlaintextSize)
			}
			if err != nil {
				clear(r.Plaintext)
				if err := bad(r.Sequence, err); err != nil {
					return [sha256.Size]byte{}, 0, err
				}
				continue
			}
			d.add(r.Sequence, to, id, r.Plaintext)
			clear(r.Plaintext)
			n++
		}
		if len(rows) < readChunk {
			break
		}
	}
	return d.sum(), n, nil
}

// rowIdentity returns a legacy row's recipient and logical id, or an error
// wrapping store.ErrInvalidArgument.
func rowIdentity(seq int64, user string, device int64, logicalID []byte) (store.DeviceAddress, store.LogicalMessageID, error) {
	to := store.DeviceAddress{UserID: user, DeviceID: device}
	if err := to.Validate(); err != nil {
		return to, store.LogicalMessageID{}, fmt.Errorf("legacy sequence %d: %w", seq, err)
	}
	id, err := store.ParseLogicalMessageID(logicalID)
	if err != nil {
		return to, id, fmt.Errorf("legacy sequence %d: %w", seq, err)
	}
	return to, id, nil
}
