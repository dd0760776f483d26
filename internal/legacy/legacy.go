// Package legacy seals a pending outbound queue left in the legacy
// plaintext layout: databases written before records were sealed, whose
// pending_outbound_message has a plaintext BLOB column where version 14
// has sealed. sqlitestore.Open runs it when the application passes
// sqlitestore.WithLegacyUpgrade (and otherwise refuses a database for which
// Found is true), after the schema migrations (migration.Up) and before it
// checks the storage key; an application does not call this package.
//
// A migration starts only on a database whose pending queue this library
// never sealed, which it tells by the storage key verifier (only a holder
// of the key can write one):
//
//   - a database that was never sealed: it records no storage key, holds
//     no local identity and no row in any other table with a sealed
//     column; or
//   - a database sealed before its pending queue was (a legacy client
//     sealed its keys, identity, pins and sessions but not the queue, as
//     fixtures/legacy): it records storage keys, every verifier opens with
//     the keyring and seals exactly store.KeyVerifierText, the unmarked
//     legacy-era text, and the keyring's current key is the active one.
//
// Every verifier this library records seals store.KeyVerifierSealedQueue
// instead, the text marked "the pending queue is sealed by this library":
// a new database's, a key rotation's, and this package's own once a
// migration ends; sqlitestore.Open marks the unmarked verifier of a
// database sealed by an earlier build on its first open. A legacy layout
// anywhere else (no key record beside sealed rows, a marked verifier, a
// migration's proof, a verifier that does not open) is refused with
// ErrPlaintextRefused and nothing is changed, so that someone who can
// write the file but does not hold the storage key cannot have rows of
// their own sealed as the user's messages.
//
// What this does not cover: a writer holding a copy of the file's own
// unmarked verifier, taken before the database was first opened by a
// build that marks it (or the whole storage_key row from a backup of that
// time), can put it back and plant a legacy layout; it is then migrated.
// That is a rollback of the storage key record, which no value stored in
// the file can detect; the same holds for a database sealed by an earlier
// build and never opened since.
//
// MigratePlaintextWith rebuilds the table sealed, in batches that each
// commit, so that a migration interrupted by a kill, an error or a
// cancelled context resumes where it stopped:
//
//  1. one transaction sets the legacy table aside as
//     pending_outbound_message_plaintext (with its version-15 index
//     pending_outbound_message_recipient, if the database had it), erases
//     every malformed row (a column NULL or of the wrong storage class, a
//     malformed recipient or logical id, a plaintext longer than
//     store.MaxPlaintextSize; each is reported through
//     Options.Progress), creates the table exactly as the version-14 DDL
//     (AUTOINCREMENT included), and records the keyring's current key in
//     storage_key (or, on a database sealed before its pending queue,
//     gives the recorded one a new verifier) with a verifier that also
//     seals a SHA-256 digest of the rows set aside: the proof that this
//     package set them aside, with this key;
//  2. each batch transaction copies the next Options.Batch rows in
//     sequence order, with their sequence and their plaintext sealed
//     (record type 5, bound by store.MessageAD to recipient and logical
//     id): the largest sealed sequence is the durable cursor;
//  3. once every row is sealed, one transaction empties the set-aside
//     table, makes the proof name no rows, restores the sqlite_sequence
//     high-water mark that a rebuild would otherwise reset (the set-aside
//     table keeps the legacy mark), and moves the version-15 index, if the
//     set-aside table has it, to the sealed table (built once, over every
//     row);
//  4. the erase step: VACUUM rewrites the file without the free pages that
//     held plaintext, a TRUNCATE checkpoint empties the WAL, and only then
//     is the emptied set-aside table dropped, in the transaction that
//     gives the storage key the marked verifier
//     (store.KeyVerifierSealedQueue).
//
// The set-aside table marks a migration under way: the next run continues
// with the batches or, once it is empty, with the erase step, but only if
// the proof is the verifier of the active storage key record of the
// keyring's current key, opens with it, and names exactly the rows in the
// set-aside table (the other tables, sealed before the pending queue in a
// legacy database or not, are not looked at: only a holder of the key
// could write the proof). A set-aside table
// without that proof (planted, or changed since it was set aside) is
// refused with ErrPlaintextRefused, nothing changed. So after a crash at
// any point, the next successful run leaves no legacy plaintext in the
// database file, its free pages or its WAL.
//
// Order. sqlitestore.Open runs the schema migrations first, so on a
// version-14 legacy database migration 15 has indexed the legacy table,
// and step 3 moves the index to the sealed one. Run before migration 15
// (this package's tests run both orders), the index does not exist, this
// package does not create it, and migration 15 adds it afterwards
// (creating it here would make migration 15 fail on an existing index).
//
// Every data statement is a sqlc-generated query (queries/legacy/ compiled
// into internal/db/legacydb against the head schema plus
// schema/legacy/pending_outbound_plaintext.sql, a declaration for sqlc only,
// never applied). The DDL steps, which sqlc cannot express as queries, are
// the reviewed files in sql/, embedded and executed in order. Every
// transaction is the project's one helper, internal/sqltx.Run.
//
// Package legacy never renumbers a sequence and never writes plaintext
// anywhere. Besides the pending queue it writes only the storage key
// record of the key it seals with (inserted, or its verifier replaced);
// the only legacy rows it deletes without sealing them are the malformed
// ones it reports.
package legacy

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/rowseal"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Errors returned (wrapped) by MigratePlaintextWith.
var (
	// ErrUnknownLayout means pending_outbound_message has neither the
	// legacy plaintext layout nor the sealed one.
	ErrUnknownLayout = errors.New("legacy: unknown pending_outbound_message layout")
	// ErrKeyNotRecorded means the keyring's current key is not the
	// database's active storage key: a migration under way recorded
	// another key (the rows left would be sealed with another key than
	// the rows before them), or a legacy database sealed before its
	// pending queue records another key as active (or none). Nothing is
	// changed.
	ErrKeyNotRecorded = errors.New("legacy: keyring's current key is not the database's active storage key")
	// ErrPlaintextRefused means the database holds a plaintext pending
	// table this package may not seal: the legacy layout in a database
	// whose pending queue this library sealed (a storage key verifier
	// carries the mark store.KeyVerifierSealedQueue or a migration's
	// proof), whose verifier does not open with the keyring (the error
	// then also wraps the seal error, seal.ErrWrongKey or
	// seal.ErrAuthentication), or that holds a local identity or sealed
	// rows but records no storage key; a set-aside
	// pending_outbound_message_plaintext without the proof that this
	// package set it aside with the keyring's current key (or whose rows
	// changed since); or both tables at once. The message names the
	// table. Nothing is changed, sealed or listed.
	ErrPlaintextRefused = errors.New("legacy: plaintext table refused")
)

// The DDL steps, in order (see the files for what each does).
//
//go:embed sql/*.sql
var ddl embed.FS

const (
	stepSetAside      = "sql/1_set_aside.sql"
	stepCreateSealed  = "sql/2_create_sealed.sql"
	stepDropPlaintext = "sql/3_drop_plaintext.sql"
	stepIndex         = "sql/4_recipient_index.sql"
	stepVacuum        = "sql/5_vacuum.sql"
)

const table = "pending_outbound_message"

// The legacy table's columns, in order.
var legacyColumns = []string{"sequence", "recipient_user_id", "recipient_device_id", "logical_id", "plaintext"}

// setAside is the name the legacy table is set aside under while it is
// migrated.
const setAside = "pending_outbound_message_plaintext"

// DefaultBatch is the number of rows a batch transaction seals when
// Options.Batch is 0. Every commit writes each index page the batch
// touched (logical ids are random, so a batch touches pages all over the
// unique index) to the WAL and then the file: at 1M rows, batches of 5,000
// took 52 s, batches of 50,000 22 s (one transaction for everything: 29
// s). A kill loses at most one batch, about a second of work; progress is
// reported as often.
const DefaultBatch = 50_000

// readChunk is how many legacy rows a read returns, so that a batch holds
// at most that many plaintexts in memory whatever its size.
const readChunk = 256

// shapeChunk is how many rows a storage-class read returns (no values).
const shapeChunk = 4096

// Phase is the step of the migration a Progress report belongs to.
type Phase int

const (
	// PhaseSeal: batches of legacy rows are being sealed.
	PhaseSeal Phase = iota + 1
	// PhaseErase: every row is sealed; the file and its WAL are being
	// rewritten without the legacy plaintext (VACUUM, checkpoint).
	PhaseErase
	// PhaseSetAside: the legacy table was set aside (step 1 committed),
	// its malformed rows erased; nothing is sealed yet.
	PhaseSetAside
)

// String returns "seal", "erase" or "set-aside".
func (p Phase) String() string {
	switch p {
	case PhaseSeal:
		return "seal"
	case PhaseErase:
		return "erase"
	case PhaseSetAside:
		return "set-aside"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Progress reports how far a legacy migration has come. MigratePlaintextWith
// sends one when it has set the legacy table aside (PhaseSetAside, only
// in the run that does it), one after every committed batch (PhaseSeal)
// and one when the erase step starts (PhaseErase).
type Progress struct {
	// Phase is the step under way.
	Phase Phase
	// Sealed is the number of legacy rows sealed so far, by this run and
	// by the interrupted runs before it.
	Sealed int64
	// Total is the number of legacy rows of the whole migration (sealed
	// before this run plus left to seal when it started), erased rows not
	// included.
	Total int64
	// Erased lists the malformed rows erased instead of sealed, in
	// sequence order; set in the PhaseSetAside report only.
	Erased []ErasedRow
}

// ErasedRow is a legacy row that could not be sealed as a pending message
// and was erased when the legacy table was set aside: its plaintext is
// deleted with it, and the erase step removes it from the file.
type ErasedRow struct {
	// Sequence is the row's sequence.
	Sequence int64
	// Reason wraps store.ErrCorruptRow (a column NULL or of the wrong
	// storage class) or ids.ErrInvalid (a malformed recipient or logical
	// id).
	Reason error
}

// Options tunes MigratePlaintextWith. The zero value is the default.
type Options struct {
	// Batch is the number of rows sealed per transaction; 0 means
	// DefaultBatch.
	Batch int
	// Progress, if not nil, is called when the table is set aside, after
	// every committed batch and when the erase step starts, on the
	// migrating goroutine.
	Progress func(Progress)
}

// Validate returns an error wrapping store.ErrInvalidArgument if o cannot
// be used (a negative Batch), nil otherwise.
func (o Options) Validate() error {
	if o.Batch < 0 {
		return fmt.Errorf("%w: legacy batch %d below 0", store.ErrInvalidArgument, o.Batch)
	}
	return nil
}

// hooks are the test seams of a run (set from this package's tests, see
// export_test.go): afterRow runs after each row is copied, with the rows
// copied so far by the call; afterRead after each read of legacy rows by
// a batch, with the number read; chunk, if not 0, replaces readChunk.
type hooks struct {
	afterRow  func(copied int)
	afterRead func(rows int)
	chunk     int
}

// MigratePlaintextWith seals a legacy plaintext pending_outbound_message
// with keys' current key, in batches (see the package documentation),
// resuming an interrupted migration, and returns the number of rows it
// sealed in this call. On a database whose table is already sealed (or has
// no such table) and no migration under way it changes nothing and
// returns 0.
//
// conn must be limited to one connection (sql.DB.SetMaxOpenConns(1), as
// sqlitestore's is). It returns an error wrapping store.ErrInvalidArgument
// for a nil database or keyring, a database allowed more connections, or
// invalid options (Options.Validate), ErrPlaintextRefused for a plaintext
// table on a database whose pending queue this library sealed (or whose
// verifier does not open) or a set-aside table without its proof,
// ErrUnknownLayout for a table it does not recognise, ErrKeyNotRecorded if
// keys' current key is not the database's active one, seal.ErrWrongKey /
// seal.ErrAuthentication if a migration under way was started with
// another key than keys' current one, or the context's error. An error
// before the first batch changes nothing; an error later keeps the
// committed batches, and the next call resumes.
func MigratePlaintextWith(ctx context.Context, conn *sql.DB, keys *seal.Keyring, opts Options) (int, error) {
	return migrate(ctx, conn, keys, opts, hooks{})
}

func migrate(ctx context.Context, conn *sql.DB, keys *seal.Keyring, opts Options, h hooks) (int, error) {
	if conn == nil || keys == nil {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: nil database or keyring", store.ErrInvalidArgument)
	}
	// The page cache it raises, the batches and the erase step must run
	// on one connection: PRAGMA cache_size is a connection's setting.
	if n := conn.Stats().MaxOpenConnections; n != 1 {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: the database must be limited to one connection (SetMaxOpenConns(1)), has %d", store.ErrInvalidArgument, n)
	}
	if err := opts.Validate(); err != nil {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w", err)
	}
	if opts.Batch == 0 {
		opts.Batch = DefaultBatch
	}
	if h.chunk <= 0 {
		h.chunk = readChunk
	}
	m := &migrator{conn: conn, keys: keys, opts: opts, hooks: h}
	if err := m.run(ctx); err != nil {
		return m.copied, fmt.Errorf("legacy: migrate plaintext: %w", err)
	}
	return m.copied, nil
}

type migrator struct {
	conn   *sql.DB
	keys   *seal.Keyring
	opts   Options
	hooks  hooks
	copied int // rows sealed by this call

	after         int64 // the last sequence sealed: the next batch starts above it
	sealed, total int64 // for Progress
	erased        []ErasedRow
	began         bool // this call set the legacy table aside
}

// migrationCacheKiB is the page cache the migration runs with (SQLite's
// default is 2 MiB). Each batch inserts into the sealed table's unique
// index at random positions (logical ids are random); with an index larger
// than the cache every insert misses, and every commit rewrites thousands
// of scattered index pages. 64 MiB holds that index up to ~1M rows; it is
// given back when the migration ends.
const migrationCacheKiB = 64 << 10

func (m *migrator) run(ctx context.Context) error {
	started, err := m.start(ctx)
	if err != nil || !started {
		return err
	}
	if m.began {
		m.report(PhaseSetAside)
	}
	restore, err := setCache(ctx, m.conn, migrationCacheKiB)
	if err != nil {
		return err
	}
	defer restore()
	for {
		more, err := m.batch(ctx)
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	if err := m.finish(ctx); err != nil {
		return err
	}
	return m.erase(ctx)
}

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
			err = m.resume(ctx, q)
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
// tables at once are refused (ErrPlaintextRefused), a table of neither
// layout is ErrUnknownLayout.
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
		return 0, fmt.Errorf("%w: columns %v", ErrUnknownLayout, cols)
	case sealedLayout:
		return layoutUnderWay, nil
	case legacyLayout:
		return 0, refused(setAside+" and "+table, "both the legacy table and a set-aside one")
	default:
		return 0, fmt.Errorf("%w: columns %v, %s present", ErrUnknownLayout, cols, setAside)
	}
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
// only reads. It returns an error wrapping ErrUnknownLayout for a pending
// table of neither layout, ErrPlaintextRefused for both tables at once.
func Found(ctx context.Context, conn legacydb.DBTX) (bool, error) {
	l, err := readLayout(ctx, legacydb.New(conn))
	if err != nil {
		return false, fmt.Errorf("legacy: %w", err)
	}
	return l != layoutNone, nil
}

func refused(tables, why string) error {
	return fmt.Errorf("%w: %s: %s", ErrPlaintextRefused, tables, why)
}

// mayBegin returns nil if a migration may start on the legacy layout: the
// database was never sealed (no storage key record, local identity or row
// in another sealed table; then record is true: step 1 records the key),
// or it was sealed before the pending queue was, by a client that never
// sealed a pending row (every storage key verifier opens with the keyring
// and seals exactly store.KeyVerifierText, none the mark
// store.KeyVerifierSealedQueue or a migration's proof; the keyring's
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
		text, err := rowseal.OpenKeyVerifier(m.keys, seal.KeyID(k.KeyID), k.Verifier)
		if err != nil {
			// Whoever wrote it does not hold this keyring's keys: a wrong
			// keyring, or a verifier put in place of the database's own.
			return false, fmt.Errorf("%w: %s: storage key %d's verifier does not open with this keyring: %w", ErrPlaintextRefused, table, k.KeyID, err)
		}
		if string(text) != store.KeyVerifierText {
			return false, refused(table, fmt.Sprintf("the database's pending queue was sealed by this library (storage key %d's verifier is marked or carries a migration's proof)", k.KeyID))
		}
		if k.State == "active" && k.KeyID == int64(m.keys.Current()) {
			current = true
		}
	}
	if !current {
		return false, fmt.Errorf("%w: current key %d is not an active storage key record", ErrKeyNotRecorded, m.keys.Current())
	}
	return false, nil
}

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
	m.erased = nil
	if err := execStep(ctx, tx, stepSetAside); err != nil {
		return err
	}
	sum, n, err := m.scanRows(ctx, q, true)
	if err != nil {
		return err
	}
	if err := execStep(ctx, tx, stepCreateSealed); err != nil {
		return err
	}
	if record {
		id, v, err := rowseal.SealKeyVerifier(m.keys, proofText(sum))
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
	m.after, m.sealed, m.total = math.MinInt64, 0, n
	return nil
}

// resume checks the proof of a migration under way: the active storage
// key record of the keyring's current key, with a verifier that opens and
// names exactly the rows of the set-aside table. Only a holder of the key
// can write that verifier, so the other tables (sealed before the pending
// queue in a legacy database, or not) need no check.
func (m *migrator) resume(ctx context.Context, q *legacydb.Queries) error {
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
		return fmt.Errorf("%w: current key %d, recorded %v", ErrKeyNotRecorded, m.keys.Current(), active)
	}
	text, err := rowseal.OpenKeyVerifier(m.keys, seal.KeyID(k.KeyID), k.Verifier)
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
	done, err := q.SealedPendingCount(ctx)
	if err != nil {
		return fmt.Errorf("count sealed rows: %w", err)
	}
	if m.after, err = q.SealedPendingMaxSequence(ctx); err != nil {
		return fmt.Errorf("read the last sealed sequence: %w", err)
	}
	left, err := q.LegacyPendingCountAfter(ctx, m.after)
	if err != nil {
		return fmt.Errorf("count legacy rows: %w", err)
	}
	m.sealed, m.total = done, done+left
	return nil
}

// proofTag separates the verifier's known value from the digest of the
// rows set aside while a migration is under way.
const proofTag = "\x00legacy migration rows\x00"

func proofText(sum [sha256.Size]byte) []byte {
	return append([]byte(store.KeyVerifierText+proofTag), sum[:]...)
}

// proofSum returns the digest a verifier's plaintext carries, if it is a
// migration's proof.
func proofSum(text []byte) (sum [sha256.Size]byte, ok bool) {
	rest, found := strings.CutPrefix(string(text), store.KeyVerifierText+proofTag)
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

func (d rowsDigest) add(seq int64, to ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte) {
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
		m.erased = append(m.erased, ErasedRow{Sequence: seq, Reason: reason})
		return nil
	}
	for after := int64(math.MinInt64); ; {
		rows, err := q.LegacyPendingShapeBatch(ctx, legacydb.LegacyPendingShapeBatchParams{AfterSequence: after, RowLimit: shapeChunk})
		if err != nil {
			return [sha256.Size]byte{}, 0, fmt.Errorf("read legacy rows: %w", err)
		}
		for _, r := range rows {
			after = r.Sequence
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
	d := newRowsDigest()
	var n int64
	for after := int64(math.MinInt64); ; {
		rows, err := q.LegacyPendingBatch(ctx, legacydb.LegacyPendingBatchParams{AfterSequence: after, RowLimit: readChunk})
		if err != nil {
			return [sha256.Size]byte{}, 0, fmt.Errorf("read legacy rows: %w", err)
		}
		for _, r := range rows {
			after = r.Sequence
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
// wrapping ids.ErrInvalid.
func rowIdentity(seq int64, user string, device int64, logicalID []byte) (ids.DeviceAddress, ids.LogicalMessageID, error) {
	to := ids.DeviceAddress{UserID: user, DeviceID: device}
	if err := to.Validate(); err != nil {
		return to, ids.LogicalMessageID{}, fmt.Errorf("legacy sequence %d: %w", seq, err)
	}
	id, err := ids.ParseLogicalMessageID(logicalID)
	if err != nil {
		return to, id, fmt.Errorf("legacy sequence %d: %w", seq, err)
	}
	return to, id, nil
}

// batch is step 2: it copies the next batch of legacy rows, sealed, into
// the sealed table in one transaction and reports whether rows may be
// left.
func (m *migrator) batch(ctx context.Context) (bool, error) {
	var (
		n    int
		last int64
	)
	err := sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		n, last = 0, m.after
		q := legacydb.New(tx)
		// Read in chunks, so that memory stays bounded by readChunk
		// messages whatever the batch size.
		for n < m.opts.Batch {
			limit := min(m.hooks.chunk, m.opts.Batch-n)
			rows, err := q.LegacyPendingBatch(ctx, legacydb.LegacyPendingBatchParams{AfterSequence: last, RowLimit: int64(limit)})
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
				sealed, err := m.keys.Seal(seal.RecordPendingOutbound, store.MessageAD(to, id), r.Plaintext)
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
				last = r.Sequence
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
	m.after = last
	m.copied += n
	m.sealed += int64(n)
	if n > 0 {
		m.report(PhaseSeal)
	}
	return n == m.opts.Batch, nil
}

func (m *migrator) report(p Phase) {
	if m.opts.Progress == nil {
		return
	}
	r := Progress{Phase: p, Sealed: m.sealed, Total: m.total}
	if p == PhaseSetAside {
		r.Erased = m.erased
	}
	m.opts.Progress(r)
}

// finish is step 3: with every row sealed, it empties the set-aside table,
// makes the proof name no rows (what the set-aside table now holds), and
// restores the high-water mark. Inserting explicit sequences set the
// sealed table's mark to max(sequence); the legacy table's mark (kept by
// the set-aside table) may be higher, its highest rows deleted. Never hand
// out a sequence twice. It is idempotent, as a resumed erase step runs it
// again.
func (m *migrator) finish(ctx context.Context) error {
	return sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		q := legacydb.New(tx)
		left, err := q.LegacyPendingCountAfter(ctx, m.after)
		if err != nil {
			return fmt.Errorf("count legacy rows: %w", err)
		}
		if left != 0 {
			return fmt.Errorf("%d legacy rows left after the last batch", left)
		}
		if err := q.DeleteAllLegacyPending(ctx); err != nil {
			return fmt.Errorf("empty %s: %w", setAside, err)
		}
		if err := m.setVerifier(ctx, q, proofText(newRowsDigest().sum())); err != nil {
			return err
		}
		legacyMark, err := q.SequenceHighWater(ctx, setAside)
		if err != nil {
			return fmt.Errorf("read sqlite_sequence: %w", err)
		}
		sealedMark, err := q.SequenceHighWater(ctx, table)
		if err != nil {
			return fmt.Errorf("read sqlite_sequence: %w", err)
		}
		highWater := max(legacyMark, sealedMark)
		if err := q.DeleteSequenceHighWater(ctx, table); err != nil {
			return fmt.Errorf("reset sqlite_sequence: %w", err)
		}
		if highWater > 0 {
			if err := q.InsertSequenceHighWater(ctx, legacydb.InsertSequenceHighWaterParams{TableName: table, Seq: highWater}); err != nil {
				return fmt.Errorf("restore sqlite_sequence: %w", err)
			}
		}
		moveIndex, err := q.SetAsideIndexCount(ctx)
		if err != nil {
			return fmt.Errorf("read indexes: %w", err)
		}
		if moveIndex > 0 {
			return execStep(ctx, tx, stepIndex)
		}
		return nil
	})
}

// erase is step 4. VACUUM cannot run inside a transaction; it rewrites the
// file from the live content only, so the pages and free space that held
// the moved rows' plaintext are gone, and the TRUNCATE checkpoint copies
// the rewrite into the file and empties the WAL, which held those pages
// too. Only once both have succeeded is the (empty, freshly rewritten)
// set-aside table dropped and the proof replaced by the marked verifier: a
// crash before that leaves the marker and its proof, and the next run
// erases again.
func (m *migrator) erase(ctx context.Context) error {
	m.report(PhaseErase)
	if err := execStep(ctx, m.conn, stepVacuum); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if err := checkpoint(ctx, m.conn); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	return sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		if err := execStep(ctx, tx, stepDropPlaintext); err != nil {
			return err
		}
		return m.setVerifier(ctx, legacydb.New(tx), []byte(store.KeyVerifierSealedQueue))
	})
}

// setVerifier replaces the verifier of the key the migration seals with
// by one sealing text.
func (m *migrator) setVerifier(ctx context.Context, q *legacydb.Queries, text []byte) error {
	id, v, err := rowseal.SealKeyVerifier(m.keys, text)
	if err != nil {
		return fmt.Errorf("seal storage key verifier: %w", err)
	}
	if err := q.UpdateStorageKeyVerifier(ctx, legacydb.UpdateStorageKeyVerifierParams{KeyID: int64(id), Verifier: v}); err != nil {
		return fmt.Errorf("update storage key verifier: %w", err)
	}
	return nil
}

// setCache sets the page cache of conn's connection (the store runs one)
// to kib KiB, if it is smaller, and returns the function that sets it back.
func setCache(ctx context.Context, conn *sql.DB, kib int) (func(), error) {
	var old int
	if err := conn.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&old); err != nil {
		return nil, fmt.Errorf("read cache_size: %w", err)
	}
	// A negative cache_size is in KiB, a positive one in pages.
	if old < 0 && -old >= kib {
		return func() {}, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA cache_size = "+strconv.Itoa(-kib)); err != nil {
		return nil, fmt.Errorf("set cache_size: %w", err)
	}
	return func() {
		// Best effort: the cache size is a performance setting, and a
		// failure here changes nothing stored.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA cache_size = "+strconv.Itoa(old))
	}, nil
}

// checkpoint runs a TRUNCATE checkpoint and fails unless it completed: a
// checkpoint blocked by a reader leaves WAL frames (which may hold
// plaintext) in place.
func checkpoint(ctx context.Context, conn *sql.DB) error {
	var busy, logFrames, done int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if busy != 0 || (logFrames > 0 && done != logFrames) {
		return fmt.Errorf("checkpoint incomplete: busy %d, %d of %d frames", busy, done, logFrames)
	}
	return nil
}

// execer is a transaction, or the database for the step that runs outside
// one.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func execStep(ctx context.Context, tx execer, name string) error {
	stmts, err := ddl.ReadFile(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, string(stmts)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
