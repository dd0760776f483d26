package legacy

// Which databases a migration may begin or resume on (the layout found, the
// sealed state and key records), and what is refused.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// start finds where the database stands: it begins a migration on a
// legacy layout in a database whose pending queue was never sealed (step
// 1, one transaction), resumes one under way whose proof holds, and
// refuses any other plaintext table. It reports whether there is anything to do.
func (m *migrator) start(ctx context.Context) (bool, error) {
	var started bool
	err := sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		q := legacydb.New(tx)
		l, err := readLayout(ctx, q)
		if err != nil {
			return err
		}
		switch l {
		case layoutNone:
			return nil // nothing to do
		case layoutPlaintext:
			err = m.begin(ctx, tx, q)
		case layoutUnderWay:
			err = m.resume(ctx, tx, q)
		}
		if err != nil {
			return err
		}
		started = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return started, nil
}

// layout is what a database's pending queue tables say about a legacy
// migration.
type layout int

const (
	layoutNone      layout = iota // sealed, or no pending table yet
	layoutPlaintext               // the legacy plaintext table, never set aside
	layoutUnderWay                // a set-aside table beside the sealed one
)

// readLayout classifies the pending queue tables, reading only. Both
// tables at once are refused (store.ErrPlaintextRefused), a table of neither
// layout is store.ErrUnknownLayout.
func readLayout(ctx context.Context, q *legacydb.Queries) (layout, error) {
	cols, err := q.PendingOutboundColumns(ctx)
	if err != nil {
		return 0, fmt.Errorf("read %s columns: %w", table, err)
	}
	underway, err := q.PlaintextTableCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", setAside, err)
	}
	legacyLayout := slices.Equal(cols, legacyColumns)
	sealedLayout := !slices.Contains(cols, "plaintext") && slices.Contains(cols, "sealed")
	switch {
	case underway == 0 && (len(cols) == 0 || sealedLayout):
		return layoutNone, nil
	case underway == 0 && legacyLayout:
		return layoutPlaintext, nil
	case underway == 0:
		return 0, fmt.Errorf("%w: columns %s", store.ErrUnknownLayout, columnList(cols))
	case sealedLayout:
		return layoutUnderWay, nil
	case legacyLayout:
		return 0, refused(setAside+" and "+table, "both the legacy table and a set-aside one")
	default:
		return 0, fmt.Errorf("%w: columns %s, %s present", store.ErrUnknownLayout, columnList(cols), setAside)
	}
}

// columnList renders column names read from the file for an error, each
// escaped (migration.Escape): a writer of the file chooses them, and they
// reach terminals and logs.
func columnList(cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = migration.Escape(c)
	}
	return "(" + strings.Join(out, ", ") + ")"
}

// SchemaObjects are the schema objects a migration under way holds beside
// the head schema's: the set-aside table, its UNIQUE constraint's index and
// the version-15 index it carries until the last step moves it.
// sqlitestore.Open accepts them only with WithLegacyUpgrade.
func SchemaObjects() []migration.Object {
	return []migration.Object{
		{Type: "table", Name: setAside, Table: setAside},
		{Type: "index", Name: "sqlite_autoindex_" + setAside + "_1", Table: setAside},
		{Type: "index", Name: table + "_recipient", Table: setAside},
	}
}

// Found reports whether the database behind conn holds what
// MigratePlaintextWith would seal or resume: a pending queue in the legacy
// plaintext layout, or a migration under way (the set-aside table). It
// only reads. It returns an error wrapping store.ErrUnknownLayout for a pending
// table of neither layout, store.ErrPlaintextRefused for both tables at once.
func Found(ctx context.Context, conn legacydb.DBTX) (bool, error) {
	l, err := readLayout(ctx, legacydb.New(conn))
	if err != nil {
		return false, fmt.Errorf("legacy: %w", err)
	}
	return l != layoutNone, nil
}

// CheckKey proves, reading only, what a migration of the legacy layout
// checks of the keyring and the rows before it begins (see mayBegin) or
// resumes (see checkProof): it returns the refusal MigratePlaintextWith
// would return (store.ErrPlaintextRefused, with seal.ErrWrongKey for a
// verifier that does not open; store.ErrKeyNotRecorded;
// store.ErrUnknownLayout), before anything migrates the file or switches
// it to WAL. It returns nil for a database of neither layout, which the
// migration itself checks.
func CheckKey(ctx context.Context, conn legacydb.DBTX, keys seal.Sealer) error {
	q := legacydb.New(conn)
	l, err := readLayout(ctx, q)
	if err != nil || l == layoutNone {
		return err
	}
	if l == layoutUnderWay {
		if err := (&migrator{keys: keys}).checkProof(ctx, q); err != nil {
			return fmt.Errorf("legacy: migrate plaintext: %w", err)
		}
		return nil
	}
	if _, err := (&migrator{keys: keys}).mayBegin(ctx, q); err != nil {
		return fmt.Errorf("legacy: migrate plaintext: %w", err)
	}
	if err := checkSequences(ctx, q); err != nil {
		return fmt.Errorf("legacy: migrate plaintext: %w", err)
	}
	return nil
}

// checkSequences returns an error wrapping store.ErrUnknownLayout if the
// legacy table's sequence column holds a value that is not an integer or
// an integer more than one row holds. The migration reads, seals and
// proves the rows in sequence order, one row per sequence: such rows would
// be skipped, and then deleted with the set-aside table. The legacy
// client's sequence was the table's rowid, which holds neither; a table
// that does is no layout this library wrote, and is refused before
// anything changes.
func checkSequences(ctx context.Context, q *legacydb.Queries) error {
	f, err := q.LegacySequenceFaults(ctx)
	if err != nil {
		return fmt.Errorf("read %s sequences: %w", table, err)
	}
	if f.NotInteger > 0 || f.Repeated > 0 {
		return fmt.Errorf("%w: %d rows whose sequence is not an integer, %d whose sequence another row holds too", store.ErrUnknownLayout, f.NotInteger, f.Repeated)
	}
	return nil
}

func refused(tables, why string) error {
	return fmt.Errorf("%w: %s: %s", store.ErrPlaintextRefused, tables, why)
}

// mayBegin returns nil if a migration may start on the legacy layout: the
// database was never sealed (no storage key record, local identity or row
// in another sealed table; then record is true: step 1 records the key),
// or it was sealed before the pending queue was, by a client that never
// sealed a pending row (every storage key verifier opens with the keyring
// and seals exactly storeimpl.KeyVerifierText, none the mark
// storeimpl.KeyVerifierSealedQueue or a migration's proof; the keyring's
// current key is the active one). Otherwise it returns the reason it is
// refused.
func (m *migrator) mayBegin(ctx context.Context, q *legacydb.Queries) (record bool, err error) {
	st, err := q.SealedState(ctx)
	if err != nil {
		return false, fmt.Errorf("read sealed state: %w", err)
	}
	if st.StorageKeys == 0 {
		if st.LocalIdentities > 0 || st.SealedRows > 0 {
			return false, refused(table, fmt.Sprintf("the database was sealed (%d local identity, %d rows in other sealed tables) and records no storage key",
				st.LocalIdentities, st.SealedRows))
		}
		return true, nil
	}
	keys, err := q.StorageKeys(ctx)
	if err != nil {
		return false, fmt.Errorf("read storage keys: %w", err)
	}
	current := false
	for _, k := range keys {
		text, err := storeimpl.OpenKeyVerifier(m.keys, seal.KeyID(k.KeyID), k.Verifier)
		if err != nil {
			// Whoever wrote it does not hold this keyring's keys: a wrong
			// keyring, or a verifier put in place of the database's own.
			return false, fmt.Errorf("%w: %s: storage key %d's verifier does not open with this keyring: %w", store.ErrPlaintextRefused, table, k.KeyID, err)
		}
		if string(text) != storeimpl.KeyVerifierText {
			return false, refused(table, fmt.Sprintf("the database's pending queue was sealed by this library (storage key %d's verifier is marked or carries a migration's proof)", k.KeyID))
		}
		if k.State == "active" && k.KeyID == int64(m.keys.Current()) {
			current = true
		}
	}
	if !current {
		return false, fmt.Errorf("%w: current key %d is not an active storage key record", store.ErrKeyNotRecorded, m.keys.Current())
	}
	return false, nil
}
