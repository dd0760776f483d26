// Package legacy migrates the legacy plaintext layout of the pending
// outbound queue (the spec's LegacyPlaintextMigration): databases written
// before records were sealed, whose pending_outbound_message has a
// plaintext BLOB column where version 14 has sealed.
//
// MigratePlaintext rebuilds that table sealed, in batches that each commit,
// so that a migration interrupted by a kill, an error or a cancelled
// context resumes where it stopped:
//
//  1. one transaction checks every legacy row's recipient and logical id
//     (a malformed row: nothing is changed), sets the legacy table aside as
//     pending_outbound_message_plaintext (with its version-15 index
//     pending_outbound_message_recipient, if the database had it), and
//     creates the table exactly as the version-14 DDL (AUTOINCREMENT
//     included);
//  2. each batch transaction copies the next Options.Batch rows in
//     sequence order, with their sequence and their plaintext sealed
//     (record type 5, bound by store.MessageAD to recipient and logical
//     id): the largest sealed sequence is the durable cursor;
//  3. once every row is sealed, one transaction empties the legacy table,
//     restores the sqlite_sequence high-water mark that a rebuild would
//     otherwise reset (the set-aside table keeps the legacy mark), and
//     moves the version-15 index, if the set-aside table has it, to the
//     sealed table (built once, over every row);
//  4. the erase step: VACUUM rewrites the file without the free pages that
//     held plaintext, a TRUNCATE checkpoint empties the WAL, and only then
//     is the emptied legacy table dropped.
//
// The set-aside table is the durable resume marker: while it exists, the
// next MigratePlaintext (run by every sqlitestore.Open) continues with the
// batches or, once it is empty, with the erase step. So after a crash at
// any point, the next successful run leaves no legacy plaintext in the
// database file, its free pages or its WAL.
//
// Order. A client runs the schema migrations first and this data migration
// after (migration.Up, then MigratePlaintext, then sqlitestore.Open), as the
// Kotlin client ran SQLDelight's migrations before LegacyPlaintextMigration.
// Both orders end in the same state: on a version-14 legacy database that
// was not migrated yet, the index does not exist, MigratePlaintext does not
// create it, and migration 15 adds it afterwards (creating it here would
// make migration 15 fail on an existing index). On a database migrated to
// 15 the index moves from the legacy table to the sealed one in step 3.
//
// Every data statement is a sqlc-generated query (queries/legacy/ compiled
// into internal/db/legacydb against the head schema plus
// schema/legacy/pending_outbound_plaintext.sql, a declaration for sqlc only,
// never applied). The DDL steps, which sqlc cannot express as queries, are
// the reviewed files in sql/, embedded and executed in order. Every
// transaction is the project's one helper, internal/sqltx.Run.
//
// Package legacy never deletes a message, never renumbers a sequence,
// never writes plaintext anywhere, and never touches any other table.
package legacy

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Errors returned (wrapped) by MigratePlaintext.
var (
	// ErrUnknownLayout means pending_outbound_message has neither the
	// legacy plaintext layout nor the sealed one.
	ErrUnknownLayout = errors.New("legacy: unknown pending_outbound_message layout")
	// ErrKeyNotRecorded means the keyring's current key is not the
	// database's active storage key: rows sealed with it would not open.
	ErrKeyNotRecorded = errors.New("legacy: keyring's current key is not the database's active storage key")
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
// migrated (the resume marker).
const setAside = "pending_outbound_message_plaintext"

// DefaultBatch is the number of rows a batch transaction seals when
// Options.Batch is 0. Every commit writes each index page the batch
// touched (logical ids are random, so a batch touches pages all over the
// unique index) to the WAL and then the file: at 1M rows, batches of 5,000
// took 52 s, batches of 50,000 22 s (one transaction for everything: 29
// s). A kill loses at most one batch, about a second of work; progress is
// reported as often.
const DefaultBatch = 50_000

// DefaultReadChunk is how many legacy rows a batch reads at a time unless
// Options.ReadChunk says otherwise, so that a batch holds at most that
// many plaintexts in memory whatever its size.
const DefaultReadChunk = 256

// Phase is the step of the migration a Progress report belongs to.
type Phase int

const (
	// PhaseSeal: batches of legacy rows are being sealed.
	PhaseSeal Phase = iota + 1
	// PhaseErase: every row is sealed; the file and its WAL are being
	// rewritten without the legacy plaintext (VACUUM, checkpoint).
	PhaseErase
)

// String returns "seal" or "erase".
func (p Phase) String() string {
	switch p {
	case PhaseSeal:
		return "seal"
	case PhaseErase:
		return "erase"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Progress reports how far a legacy migration has come. MigratePlaintext
// sends one after every committed batch (PhaseSeal) and one when the erase
// step starts (PhaseErase).
type Progress struct {
	// Phase is the step under way.
	Phase Phase
	// Sealed is the number of legacy rows sealed so far, by this run and
	// by the interrupted runs before it.
	Sealed int64
	// Total is the number of legacy rows of the whole migration (sealed
	// before this run plus left to seal when it started).
	Total int64
}

// Options tunes MigratePlaintextWith. The zero value is the default.
type Options struct {
	// Batch is the number of rows sealed per transaction; 0 means
	// DefaultBatch.
	Batch int
	// Progress, if not nil, is called after every committed batch and when
	// the erase step starts, on the migrating goroutine.
	Progress func(Progress)
	// ReadChunk is the number of legacy rows a batch reads (and holds in
	// memory) at a time; 0 means DefaultReadChunk. It bounds memory, not
	// the batch: a batch reads as many chunks as it seals rows.
	ReadChunk int

	// afterRow, if not nil, runs after each row is copied, with the rows
	// copied so far by this call; afterRead, after each read of legacy
	// rows, with the number read. Set by this package's tests only.
	afterRow  func(copied int)
	afterRead func(rows int)
}

// MigratePlaintext is MigratePlaintextWith with the default options.
func MigratePlaintext(ctx context.Context, conn *sql.DB, keys *seal.Keyring) (int, error) {
	return MigratePlaintextWith(ctx, conn, keys, Options{})
}

// MigratePlaintextWith seals a legacy plaintext pending_outbound_message
// with keys' current key, in batches (see the package documentation),
// resuming an interrupted migration, and returns the number of rows it
// sealed in this call. On a database whose table is already sealed (or has
// no such table) and no migration under way it changes nothing and
// returns 0, so it is safe to run on every start.
//
// conn must be limited to one connection (sql.DB.SetMaxOpenConns(1), as
// sqlitestore's is). It returns an error wrapping store.ErrInvalidArgument
// for a nil database or keyring, a database allowed more connections, or
// a negative batch, ErrUnknownLayout for a table it does not
// recognise, ErrKeyNotRecorded if storage_key records active keys and
// keys' current key is not one of them, ids.ErrInvalid for a row whose
// logical id or recipient is malformed, or the context's error. An error
// before the first batch (layout, key, malformed row) changes nothing; an
// error later keeps the committed batches, and the next call resumes.
func MigratePlaintextWith(ctx context.Context, conn *sql.DB, keys *seal.Keyring, opts Options) (int, error) {
	if conn == nil || keys == nil {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: nil database or keyring", store.ErrInvalidArgument)
	}
	// The page cache it raises, the batches and the erase step must run
	// on one connection: PRAGMA cache_size is a connection's setting.
	if n := conn.Stats().MaxOpenConnections; n != 1 {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: the database must be limited to one connection (SetMaxOpenConns(1)), has %d", store.ErrInvalidArgument, n)
	}
	if opts.Batch < 0 {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: batch %d below 0", store.ErrInvalidArgument, opts.Batch)
	}
	if opts.ReadChunk < 0 {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: read chunk %d below 0", store.ErrInvalidArgument, opts.ReadChunk)
	}
	if opts.Batch == 0 {
		opts.Batch = DefaultBatch
	}
	if opts.ReadChunk == 0 {
		opts.ReadChunk = DefaultReadChunk
	}
	m := &migrator{conn: conn, keys: keys, opts: opts}
	if err := m.run(ctx); err != nil {
		return m.copied, fmt.Errorf("legacy: migrate plaintext: %w", err)
	}
	return m.copied, nil
}

type migrator struct {
	conn   *sql.DB
	keys   *seal.Keyring
	opts   Options
	copied int // rows sealed by this call

	after         int64 // the last sequence sealed: the next batch starts above it
	sealed, total int64 // for Progress
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

// start finds where the database stands. On a legacy layout it checks the
// key and every row and sets the table aside (step 1, one transaction); on
// a migration under way it checks the key. It reports whether there is
// anything to do.
func (m *migrator) start(ctx context.Context) (bool, error) {
	var started bool
	err := sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		q := legacydb.New(tx)
		cols, err := q.PendingOutboundColumns(ctx)
		if err != nil {
			return fmt.Errorf("read %s columns: %w", table, err)
		}
		underway, err := q.PlaintextTableCount(ctx)
		if err != nil {
			return fmt.Errorf("read %s: %w", setAside, err)
		}
		sealedLayout := !slices.Contains(cols, "plaintext") && slices.Contains(cols, "sealed")
		switch {
		case len(cols) == 0 && underway == 0:
			return nil // no such table: nothing to do
		case sealedLayout && underway == 0:
			return nil // already sealed: nothing to do
		case sealedLayout:
			// A migration under way: resume it.
		case slices.Equal(cols, legacyColumns) && underway == 0:
			// A legacy table: set it aside, below.
		default:
			return fmt.Errorf("%w: columns %v, %s present: %v", ErrUnknownLayout, cols, setAside, underway > 0)
		}
		if err := checkKey(ctx, q, m.keys); err != nil {
			return err
		}
		started = true
		if underway == 0 {
			if err := setAsideLegacy(ctx, tx, q); err != nil {
				return err
			}
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
	})
	if err != nil {
		return false, err
	}
	return started, nil
}

func checkKey(ctx context.Context, q *legacydb.Queries, keys *seal.Keyring) error {
	active, err := q.ActiveStorageKeyIDs(ctx)
	if err != nil {
		return fmt.Errorf("read storage keys: %w", err)
	}
	if len(active) > 0 && !slices.Contains(active, int64(keys.Current())) {
		return fmt.Errorf("%w: current key %d, active %v", ErrKeyNotRecorded, keys.Current(), active)
	}
	return nil
}

// setAsideLegacy is step 1: it renames the legacy table (its
// sqlite_sequence mark and its index go with it), checks every row's
// identity, and creates the sealed table.
func setAsideLegacy(ctx context.Context, tx *sql.Tx, q *legacydb.Queries) error {
	if err := execStep(ctx, tx, stepSetAside); err != nil {
		return err
	}
	if err := checkRows(ctx, q); err != nil {
		return err
	}
	return execStep(ctx, tx, stepCreateSealed)
}

// checkRows validates every legacy row's recipient and logical id (not its
// plaintext, which is not read), so that a malformed row is reported before
// any batch commits.
func checkRows(ctx context.Context, q *legacydb.Queries) error {
	after := int64(math.MinInt64)
	for {
		rows, err := q.LegacyPendingIdentityBatch(ctx, legacydb.LegacyPendingIdentityBatchParams{AfterSequence: after, RowLimit: 4096})
		if err != nil {
			return fmt.Errorf("read legacy rows: %w", err)
		}
		for _, r := range rows {
			after = r.Sequence
			if _, _, err := rowIdentity(r.Sequence, r.RecipientUserID, r.RecipientDeviceID, r.LogicalID); err != nil {
				return err
			}
		}
		if len(rows) < 4096 {
			return nil
		}
	}
}

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
		// Read in chunks, so that memory stays bounded by ReadChunk
		// messages whatever the batch size.
		for n < m.opts.Batch {
			limit := min(m.opts.ReadChunk, m.opts.Batch-n)
			rows, err := q.LegacyPendingBatch(ctx, legacydb.LegacyPendingBatchParams{AfterSequence: last, RowLimit: int64(limit)})
			if err != nil {
				return fmt.Errorf("read legacy rows: %w", err)
			}
			if m.opts.afterRead != nil {
				m.opts.afterRead(len(rows))
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
				if m.opts.afterRow != nil {
					m.opts.afterRow(m.copied + n)
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
	if m.opts.Progress != nil {
		m.opts.Progress(Progress{Phase: p, Sealed: m.sealed, Total: m.total})
	}
}

// finish is step 3: with every row sealed, it empties the set-aside table
// and restores the high-water mark. Inserting explicit sequences set the
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
// set-aside table dropped: a crash before that leaves the marker, and the
// next run erases again.
func (m *migrator) erase(ctx context.Context) error {
	m.report(PhaseErase)
	if err := execStep(ctx, m.conn, stepVacuum); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if err := checkpoint(ctx, m.conn); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	return sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		return execStep(ctx, tx, stepDropPlaintext)
	})
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
