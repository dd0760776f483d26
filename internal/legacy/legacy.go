// Package legacy seals a pending outbound queue left in the legacy
// plaintext layout: databases written before records were sealed, whose
// pending_outbound_message has a plaintext BLOB column where version 14
// has sealed. sqlitestore.Open runs it (Upgrade) when the application
// passes sqlitestore.WithLegacyUpgrade (and otherwise refuses a database
// for which Found is true), between the schema migrations up to
// LayoutVersion and the later ones, and before it checks the storage key;
// an application does not call this package.
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
//     the keyring and seals exactly storeimpl.KeyVerifierText, the unmarked
//     legacy-era text, and the keyring's current key is the active one.
//
// Every verifier this library records seals storeimpl.KeyVerifierSealedQueue
// instead, the text marked "the pending queue is sealed by this library":
// a new database's, a key rotation's, and this package's own once a
// migration ends; sqlitestore.Open marks the unmarked verifier of a
// database sealed by an earlier build on its first open. A legacy layout
// anywhere else (no key record beside sealed rows, a marked verifier, a
// migration's proof, a verifier that does not open) is refused with
// store.ErrPlaintextRefused and nothing is changed (sqlitestore.Open asks
// CheckKey before it changes the file), so that someone who can write the
// file but does not hold the storage key cannot have rows of their own
// sealed as the user's messages.
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
//     store.MaxPlaintextSize, the recipient and logical id of a row at a
//     lower sequence; each is reported through Options.Progress), creates
//     the table exactly as the version-14 DDL (AUTOINCREMENT included),
//     and records the keyring's current key in
//     storage_key (or, on a database sealed before its pending queue,
//     gives the recorded one a new verifier) with a verifier that also
//     seals a SHA-256 digest of the rows set aside: the proof that this
//     package set them aside, with this key;
//  2. each batch transaction copies the next Options.Batch rows in
//     sequence order, with their sequence and their plaintext sealed
//     (record type 5, bound by seal.MessageAD to recipient and logical
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
//     (storeimpl.KeyVerifierSealedQueue).
//
// The set-aside table marks a migration under way: the next run continues
// with the batches or, once it is empty, with the erase step, but only if
// the proof is the verifier of the active storage key record of the
// keyring's current key, opens with it, and names exactly the rows in the
// set-aside table (the other tables, sealed before the pending queue in a
// legacy database or not, are not looked at: only a holder of the key
// could write the proof). A set-aside table
// without that proof (planted, or changed since it was set aside) is
// refused with store.ErrPlaintextRefused, no row changed. So after a crash at
// any point, the next successful run leaves no legacy plaintext in the
// database file, its free pages or its WAL.
//
// Order. sqlitestore.Open runs Upgrade: on a database in the legacy
// layout (or with a migration under way) it runs the schema migrations up
// to LayoutVersion, the version the layout belongs to, then this
// migration, then the later schema migrations, which so change the sealed
// table as on any other database. On a version-14 legacy database
// migration 15 has then indexed the legacy table, and step 3 moves the
// index to the sealed one. Run before migration 15 (this package's tests
// run both orders), the index does not exist, this package does not
// create it, and migration 15 adds it afterwards (creating it here would
// make migration 15 fail on an existing index). A legacy layout in a
// database above LayoutVersion, which went through migrations the rebuild
// would undo, is refused (store.ErrUnknownLayout), and so is a legacy
// table whose sequence is not a key (a value that is not an integer, or
// an integer two rows hold: the rows are read in sequence order, and such
// rows would be skipped).
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
	"database/sql"
	"embed"
	"fmt"

	"github.com/securemsg/storage/internal/nilarg"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
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

// Options tunes MigratePlaintextWith. The zero value is the default.
type Options struct {
	// Batch is the number of rows sealed per transaction; 0 means
	// DefaultBatch.
	Batch int
	// Progress, if not nil, is called when the table is set aside, after
	// every committed batch and when the erase step starts, on the
	// migrating goroutine.
	Progress func(store.LegacyProgress)
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
// invalid options (Options.Validate), store.ErrPlaintextRefused for a plaintext
// table on a database whose pending queue this library sealed (or whose
// verifier does not open) or a set-aside table without its proof,
// store.ErrUnknownLayout for a table it does not recognise, store.ErrKeyNotRecorded if
// keys' current key is not the database's active one, seal.ErrWrongKey /
// seal.ErrAuthentication if a migration under way was started with
// another key than keys' current one, or the context's error. An error
// before the first batch changes nothing; an error later keeps the
// committed batches, and the next call resumes.
func MigratePlaintextWith(ctx context.Context, conn *sql.DB, keys seal.Sealer, opts Options) (int, error) {
	return migrate(ctx, conn, keys, opts, hooks{})
}

func migrate(ctx context.Context, conn *sql.DB, keys seal.Sealer, opts Options, h hooks) (int, error) {
	if conn == nil || nilarg.Is(keys) {
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
	keys   seal.Sealer
	opts   Options
	hooks  hooks
	copied int // rows sealed by this call

	next          int64 // the first sequence not yet sealed: the next batch starts at it
	end           bool  // a row at the largest int64 is sealed: no sequence is left
	sealed, total int64 // for Progress
	erased        []store.ErasedLegacyRow
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
		m.report(store.LegacySetAside)
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
