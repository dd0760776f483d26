// Package sqlitestore is the client's local SQLite database (Open): the
// store an application hands to client.Open, migrated to the head schema
// on open, every statement a sqlc-generated query from queries/*.sql,
// every sealed column a seal record bound to its row.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a
// call that returned is on disk and survives a process kill or a power
// loss; foreign keys are enforced.
//
// Transactions: every call of store.Store runs through one helper, as
// one transaction but for the count noted below. A call of one statement
// (a page from a non-negative cursor, a count, a recipient's next
// message, a page of recipients, the local identity, AbandonPending) runs as SQLite's own transaction of that
// statement, without BEGIN and COMMIT around it; a call of several
// statements runs between BEGIN IMMEDIATE and COMMIT, so that two writers
// never deadlock upgrading a read lock and a failed COMMIT is seen as
// such. The count of all pending messages may run two: its one statement,
// then, when another connection wrote meanwhile, a transaction that
// counts again. Two calls outside the contract run many: RotateKey, one
// through the helper per batch (and one to record the key, one to count
// the rows when given a progress function, one to finish), and Open, which reads what it
// checks before changing the file in statements of their own, migrates
// the schema in one transaction (in two around a legacy upgrade, which
// runs one per batch and one for each of its other steps; internal/sqltx),
// and makes its last checks in one through the helper.
//
// The store never runs OFFSET queries, never opens a sealed record it
// does not return, and never makes a network call.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/dblock"
	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/storemark"

	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Store is the SQLite store. It is safe for concurrent use.
type Store struct {
	mark // implements store.Store (see internal/storemark)

	// conn and keys are set by Open and never changed. The module's
	// tests and tools read them by name (internal/sqliteaccess.DB and
	// Keyring): a rename is made there too.
	conn *sql.DB
	q    *db.Queries
	keys seal.RotatingSealer
	// closed is set once by Close, so that tx, which reads it under
	// sealMu, refuses every call that begins after it with
	// store.ErrClosed rather than the driver's closed-handle error.
	closed atomic.Bool
	// closeOnce runs Close's work once; a Close racing it waits for it, so
	// that no Close returns before the file is released.
	closeOnce sync.Once
	// lock is the database file's writer lock (lock.go), nil for an
	// in-memory database; claim is the client's claim (Claim).
	lock  *dblock.Lock
	claim atomic.Pointer[byte] // a byte, not a zero-size value: each claim distinct

	// sealMu is held shared by every transaction (tx), in which the
	// values it writes are sealed and the values it reads are opened. It
	// is held exclusively by RotateKey while it switches the sealing key,
	// so that no value sealed with the old key is written once a rotation
	// has started walking the tables, and while it forgets the old keys,
	// so that no value read before the walk re-sealed it is opened after.
	// Close takes it exclusively too, so that it closes the connection
	// and releases the file only once the transactions under way have
	// ended.
	sealMu sync.RWMutex

	// rotateMu serialises this store's key rotations (RotateKey): two at
	// once would fight over which key is active, and one could add a key
	// sharing its id with a key the other holds. The store holds its file
	// alone, so this lock is the database's.
	rotateMu sync.Mutex

	// count is the number of pending outbound rows (count.go).
	count pendingCount
}

var _ store.Store = (*Store)(nil)

// mark is embedded by Store under an unexported name, so that it is no
// part of Store's documented fields.
type mark = storemark.Mark

// DefaultLegacyBatch is the batch WithLegacyBatch uses when given 0: legacy
// rows sealed per transaction.
const DefaultLegacyBatch = legacy.DefaultBatch

// Option configures Open.
type Option func(*options)

type options struct {
	legacy  legacy.Options
	upgrade bool // WithLegacyUpgrade
	restart bool // WithSequenceRestart
}

// WithLegacyUpgrade makes Open seal a pending queue left in the legacy
// plaintext layout, or resume such a migration. Without it Open refuses
// such a database with store.ErrLegacyLayout: a file writer who plants the
// plaintext layout (in a doctored copy with the key records removed, say)
// would otherwise have text of their choosing sealed with the user's key.
// Only the release that upgrades databases from the plaintext layout
// should pass it, and only until its users have started it once.
func WithLegacyUpgrade() Option {
	return func(o *options) { o.upgrade = true }
}

// WithLegacyProgress makes Open report the progress of a legacy plaintext
// migration (run only with WithLegacyUpgrade) to fn: when the legacy table
// is set aside (with the malformed rows erased instead of sealed, each
// with its sequence and reason), after every committed batch and when the
// erase step starts. fn runs on the goroutine calling Open. On a database
// with nothing to migrate it is never called.
func WithLegacyProgress(fn func(store.LegacyProgress)) Option {
	return func(o *options) { o.legacy.Progress = fn }
}

// WithLegacyBatch sets how many legacy rows Open seals per transaction
// (DefaultLegacyBatch if n is 0). A smaller batch commits more often; a
// kill loses at most one batch of work either way.
func WithLegacyBatch(n int) Option {
	return func(o *options) { o.legacy.Batch = n }
}

// Open opens (creating if absent) the database at path, migrates it to the
// head schema, with WithLegacyUpgrade seals a pending queue left in the
// legacy plaintext layout by a database whose pending queue was never
// sealed (resuming an interrupted legacy migration, including its erase
// step), and checks that keys holds the database's
// storage key. Without WithLegacyUpgrade, a database holding the legacy
// layout is refused with store.ErrLegacyLayout before anything is changed. A
// database holding any schema object the migrations do not define (a
// planted trigger, view, table or index) is refused before anything is
// changed too.
//
// Every storage key verifier the store records carries a mark that tells
// the legacy migration to refuse a plaintext pending table found later. On a database sealed by a
// build that did not mark it, Open gives the active verifier of keys'
// current key the mark (one transaction, nothing else changed).
//
// keys is the application's *seal.Keyring (or a type wrapping one, as a
// test's that counts opens): the store seals and opens every value
// through it, and RotateKey adds and forgets its keys.
//
// path is first resolved to the file it names (every symbolic link
// followed; a dangling symbolic link is refused with an error wrapping
// fs.ErrNotExist), and everything below is done on that file. A new
// database file is created with mode 0600 (owner only) before SQLite
// opens it; SQLite gives its -wal and -shm files the database file's mode.
// An existing database file (and its -wal and -shm) readable or writable
// by group or others has those permission bits removed (and given back if
// Open then fails); a -wal, -shm or -journal that is a symbolic or hard
// link is refused with store.ErrSymlink.
//
// The store holds the database file while it is open: a second Open of
// the same file, by any path, in this process or another (an app
// extension, say), fails at once with an error wrapping store.ErrInUse
// that names the file, until the store is closed or its process ends (a
// killed process leaves no stale hold). The hold is an exclusive flock on
// the sidecar file <file>-lock, created 0600 beside the database and left
// in place (never followed if it is a symbolic link: store.ErrSymlink), and, on
// unix, an flock on the database file itself, so that removing or
// replacing the sidecar lets no second store in. migrate up takes the
// same hold, while the read-only migrate commands (status, plan, drift)
// do not and work beside an open store.
//
// Bad input changes nothing, and leaves no file beside the path:
// "", ":memory:", any SQLite URI ("file:" in any case) and a path
// holding a NUL byte are refused with store.ErrInvalidArgument (the store
// needs the path of a file); a directory, another kind of file or a file
// that is not a SQLite database with store.ErrNotDatabase; a read-only file or directory (no
// owner write permission, or none for this process) with an error
// matching fs.ErrPermission. An Open that fails for any other reason (a
// done context, a refused database) removes the files it created. Every
// error names the path once.
//
// Open records keys' current key as the storage key only for a database
// that records none and holds no sealed value. Its errors, all checked
// with errors.Is, are those of bad input above; store.ErrInUse if another
// store holds the file; seal.ErrWrongKey if the database was sealed with
// a key keys does not hold (found before the file is migrated or
// changed); store.ErrNoKeyRecord if it records no active
// key but holds sealed values; store.ErrInvalidArgument for a nil keyring
// or a nil or invalid option, and with seal.ErrKey for a keyring holding
// no key (the zero Keyring); store.ErrSequenceExhausted for a pending sequence
// high-water mark at the largest int64 (without WithSequenceRestart);
// store.ErrLegacyLayout; schema.ErrUnknownObject (naming each) for a
// database holding a table, index, view or trigger that no migration
// defines at its version, and schema.ErrSchemaMismatch (naming each and
// what differs) for one the migrations define with another definition
// (the database is held to the migrations' definitions, not their names)
// or a schema SQLite cannot load (its message, which quotes the file's
// text, escaped); a legacy upgrade's store.ErrPlaintextRefused (a plaintext
// table in a database whose pending queue was sealed, or a set-aside
// table without its proof), store.ErrUnknownLayout or
// store.ErrKeyNotRecorded; and the schema's schema.ErrChecksum,
// schema.ErrNewerDatabase, schema.ErrUnknownState and
// schema.ErrOutOfOrder.
func Open(ctx context.Context, path string, keys seal.RotatingSealer, opts ...Option) (*Store, error) {
	s, err := open(ctx, path, keys, opts)
	if err != nil {
		return nil, fmt.Errorf("store: open %q: %w", path, pathOnce(err, path))
	}
	return s, nil
}

// pathOnce returns err, the error of opening path, without path when it
// is the system's error about path itself: Open's context names it.
func pathOnce(err error, path string) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Path == path {
		return pathless{pe}
	}
	return err
}

// pathless is a *fs.PathError said without its path.
type pathless struct{ pe *fs.PathError }

func (p pathless) Error() string { return p.pe.Op + ": " + p.pe.Err.Error() }
func (p pathless) Unwrap() error { return p.pe }

// open is Open, its errors not yet naming the path.
func open(ctx context.Context, path string, keys seal.RotatingSealer, opts []Option) (*Store, error) {
	if err := storeimpl.CheckKeyring(keys); err != nil {
		return nil, err
	}
	var o options
	for i, opt := range opts {
		// A nil Option (an optional setting left unset in a slice, say)
		// would otherwise panic here.
		if opt == nil {
			return nil, fmt.Errorf("%w: option %d of %d is nil", store.ErrInvalidArgument, i+1, len(opts))
		}
		opt(&o)
	}
	if err := o.legacy.Validate(); err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	// Before any file is made: a context already done changes nothing.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := holdFile(path)
	if err != nil {
		return nil, err
	}
	s := &Store{keys: keys, lock: h.lock}
	if s.conn, err = openConn(ctx, h.real, &s.count.opened); err != nil {
		h.undo()
		return nil, err
	}
	s.q = db.New(s.conn)
	if err := s.init(ctx, o, h.real); err != nil {
		if h.walBefore {
			// The file and its -wal stay as they were found.
			sqliteaccess.CloseKeepingWAL(s.conn, sqliteaccess.Driver(ctx), h.real)
		} else {
			s.conn.Close()
		}
		h.undo()
		return nil, err
	}
	return s, nil
}

// openConn opens the store's one connection to the file at real, each
// connection it opens counted in opened (see pendingCount).
func openConn(ctx context.Context, real string, opened *atomic.Uint64) (*sql.DB, error) {
	// The build's SQLite driver, or in this module's tests a driver wrapping it that
	// injects faults (internal/sqliteaccess.WithDriver).
	conn, err := openCounted(sqliteaccess.Driver(ctx), sqliteaccess.DSN(real), opened)
	if err != nil {
		return nil, err
	}
	// One connection: the client is the database's only user, and a single
	// connection turns would-be SQLITE_BUSY contention into Go-side waits;
	// the in-memory count relies on it too (pendingCount).
	conn.SetMaxOpenConns(1)
	return conn, nil
}

func (s *Store) init(ctx context.Context, o options, real string) error {
	// The first statement reads the file and its schema: SQLite finds
	// here a file that starts with its header but is not a database, and
	// a schema it cannot load (a definition it cannot parse, an object
	// whose root page is another's), whose text its message quotes.
	fk, err := s.q.ForeignKeysEnforced(ctx)
	if sqlitedriver.IsNotADB(err) {
		return fmt.Errorf("%w: %w", store.ErrNotDatabase, err)
	} else if sqlitedriver.IsCorrupt(err) {
		return fmt.Errorf("%w: SQLite cannot read the database's schema: %s", schema.ErrSchemaMismatch, migration.Escape(err.Error()))
	}
	if err != nil {
		return fmt.Errorf("enable foreign keys: %w", err)
	}
	if fk != 1 {
		return fmt.Errorf("enable foreign keys: foreign_keys=%d after the connection enabled them", fk)
	}
	// Before the schema migrations, which would index a legacy table.
	legacyFound, err := legacy.Found(ctx, s.conn)
	if err != nil {
		return err
	}
	if legacyFound && !o.upgrade {
		return store.ErrLegacyLayout
	}
	m := sqliteaccess.Migrator(ctx)
	if m == nil {
		var err error
		if m, err = migration.Default(); err != nil {
			return err
		}
	}
	// Before anything writes: a planted trigger would run inside the
	// store's own transactions from the first one on.
	var allow []migration.Object
	if o.upgrade {
		var err error
		if allow, err = legacy.Allowed(ctx, s.conn); err != nil {
			return err
		}
	}
	if err := m.CheckObjects(ctx, s.conn, allow...); err != nil {
		return err
	}
	stats, err := migration.HoldsStatistics(ctx, s.conn)
	if err != nil {
		return err
	}
	// A keyring without the database's active key, and a database that
	// records keys but none active, are refused before the switch to WAL
	// and the migrations, which would change the file; a legacy layout,
	// or a migration of it under way, by the legacy upgrade's own checks,
	// which refuse with the reason they refuse the table for.
	if !legacyFound {
		if err := s.verifyActiveKeys(ctx, m); err != nil {
			return err
		}
	} else if err := legacy.CheckKey(ctx, s.conn, s.keys); err != nil {
		return err
	}
	// WAL only once the file passed the checks: switching a file in
	// another journal mode rewrites its header, and a refused file is
	// left as it was.
	var mode string
	if err := s.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("enable wal: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("enable wal: journal mode is %q", mode)
	}
	// A database from before sealing keeps its pending queue in plaintext:
	// seal it now, if asked to, between the migrations up to the version
	// its layout belongs to and the later ones (legacy.Upgrade). Before the
	// key check, which would record a marked key on a database that
	// records none (the migration records the key itself there) and marks
	// an unmarked verifier: either would make the migration refuse the
	// database.
	if !o.upgrade {
		if _, err := m.Up(ctx, s.conn); err != nil {
			return err
		}
	} else {
		if _, err := legacy.Upgrade(ctx, s.conn, m, s.keys, o.legacy); err != nil {
			return err
		}
		// The rebuilt pending table is held to the migrations' definitions.
		if err := m.CheckObjects(ctx, s.conn); err != nil {
			return err
		}
	}
	// The migrations clear any planner statistics the file held, but the
	// connection that loaded them keeps part of them (an index's
	// "unordered" flag): the store then plans on a new connection, which
	// loads none.
	if stats {
		conn, err := openConn(ctx, real, &s.count.opened)
		if err != nil {
			return err
		}
		s.conn.Close()
		s.conn, s.q = conn, db.New(conn)
	}
	// One transaction for what every open checks on a sealed database.
	return s.tx(ctx, transaction, func(q *txn) error {
		if err := s.checkKey(ctx, q.Queries); err != nil {
			return err
		}
		if err := repairSequence(ctx, q.Queries); err != nil {
			return err
		}
		return checkSequence(ctx, q.Queries, o.restart)
	})
}

// checkKey proves the keyring holds the database's active storage key by
// opening its verifier, or records the current key for a database that
// records no key and holds nothing sealed. A database holding sealed
// values without an active key record is refused (store.ErrNoKeyRecord): adopting
// the given key would make a wrong key the database's, and the right one
// fail from then on.
//
// It runs after the legacy migration, so the pending queue is sealed: an
// active verifier of the keyring's current key that seals the unmarked
// storeimpl.KeyVerifierText (written by a build that did not mark it) is
// given the marked storeimpl.KeyVerifierSealedQueue in the same transaction,
// so that package legacy refuses a plaintext table planted from then on.
func (s *Store) checkKey(ctx context.Context, q *db.Queries) error {
	rows, err := q.ListStorageKeys(ctx)
	if err != nil {
		return fmt.Errorf("read storage keys: %w", err)
	}
	active := 0
	for _, r := range rows {
		if r.State != "active" {
			continue
		}
		text, err := s.openVerifier(r)
		if err != nil {
			return err
		}
		// A verifier is sealed by its own key, which seals only while
		// current: another key's waits until it is current (or a
		// rotation records it anew).
		if string(text) == storeimpl.KeyVerifierText && seal.KeyID(r.KeyID) == s.keys.Current() {
			if err := s.markKey(ctx, q); err != nil {
				return err
			}
		}
		active++
	}
	if active > 0 {
		return nil
	}
	sealed, err := q.AnySealedValue(ctx)
	if err != nil {
		return fmt.Errorf("look for sealed values: %w", err)
	}
	if len(rows) > 0 || sealed != 0 {
		return fmt.Errorf("%d storage key rows, none active: %w", len(rows), store.ErrNoKeyRecord)
	}
	return s.addKey(ctx, q)
}

// verifyActiveKeys proves, reading only, that the keyring holds every
// active storage key the database records (none for a new database),
// and refuses a database that records keys but none active, or, at
// m's head, none at all while it holds sealed values
// (store.ErrNoKeyRecord, as checkKey). Below head the sealed tables are
// those of an older layout, which the query does not know: checkKey
// finds that case after the migrations.
func (s *Store) verifyActiveKeys(ctx context.Context, m *migration.Migrator) error {
	if n, err := s.q.TableCount(ctx, "storage_key"); err != nil || n == 0 {
		return err
	}
	rows, err := s.q.ListStorageKeys(ctx)
	if err != nil {
		return fmt.Errorf("read storage keys: %w", err)
	}
	active := 0
	for _, r := range rows {
		if r.State != "active" {
			continue
		}
		if _, err := s.openVerifier(r); err != nil {
			return err
		}
		active++
	}
	if len(rows) > 0 && active == 0 {
		return fmt.Errorf("%d storage key rows, none active: %w", len(rows), store.ErrNoKeyRecord)
	}
	if len(rows) > 0 {
		return nil
	}
	st, err := m.Status(ctx, s.conn)
	if err != nil || st.Current != m.Head() {
		return err
	}
	sealed, err := s.q.AnySealedValue(ctx)
	if err != nil {
		return fmt.Errorf("look for sealed values: %w", err)
	}
	if sealed != 0 {
		return fmt.Errorf("0 storage key rows: %w", store.ErrNoKeyRecord)
	}
	return nil
}

// openVerifier opens the verifier of the storage key recorded in r and
// returns the text it seals; seal.ErrWrongKey, naming the ids, if the
// keyring does not hold the key.
func (s *Store) openVerifier(r db.ListStorageKeysRow) ([]byte, error) {
	text, err := storeimpl.OpenKeyVerifier(s.keys, seal.KeyID(r.KeyID), r.Verifier)
	if errors.Is(err, seal.ErrWrongKey) {
		// seal's own text names the key id too: name each id once.
		return nil, fmt.Errorf("the database's active storage key is key id %d, the keyring holds key ids %v: %w", r.KeyID, s.keys.KeyIDs(), seal.ErrWrongKey)
	}
	if err != nil {
		return nil, fmt.Errorf("storage key %d: %w", r.KeyID, err)
	}
	return text, nil
}

// markKey gives the record of keys' current key the marked verifier.
func (s *Store) markKey(ctx context.Context, q *db.Queries) error {
	id, v, err := storeimpl.SealKeyVerifier(s.keys, []byte(storeimpl.KeyVerifierSealedQueue))
	if err != nil {
		return fmt.Errorf("storage key %d: mark verifier: %w", id, err)
	}
	if err := q.UpdateStorageKeyVerifier(ctx, db.UpdateStorageKeyVerifierParams{Verifier: v, KeyID: int64(id)}); err != nil {
		return fmt.Errorf("storage key %d: mark verifier: %w", id, err)
	}
	return nil
}

// addKey records keys' current key as the active one, with the marked
// verifier (the store keeps its pending queue sealed).
func (s *Store) addKey(ctx context.Context, q *db.Queries) error {
	id, v, err := storeimpl.SealKeyVerifier(s.keys, []byte(storeimpl.KeyVerifierSealedQueue))
	if err != nil {
		return fmt.Errorf("record storage key: %w", err)
	}
	if err := q.InsertStorageKey(ctx, db.InsertStorageKeyParams{KeyID: int64(id), State: "active", Verifier: v, CreatedAt: time.Now().Unix()}); err != nil {
		return fmt.Errorf("record storage key: %w", err)
	}
	return nil
}

// Close closes the database and then releases its file (see Open);
// closing it again returns nil, once the file is released (a Close
// racing the first waits for it). A call under way when Close is called
// ends first (committed or rolled back, as it would have been) and Close
// waits for it, so that no write lands after the file is released; a call
// that had not begun returns store.ErrClosed. See store.Store.Close for
// other calls after Close.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.sealMu.Lock()
		err = s.conn.Close()
		s.sealMu.Unlock()
		if lerr := s.lock.Release(); err == nil && lerr != nil {
			err = fmt.Errorf("store: release lock: %w", lerr)
		}
	})
	return err
}

// Claim implements store.Store.
func (s *Store) Claim() (func(), error) {
	if s.closed.Load() {
		return nil, storeimpl.OpClaim.Wrap(store.ErrClosed)
	}
	c := new(byte)
	if !s.claim.CompareAndSwap(nil, c) {
		return nil, storeimpl.OpClaim.Wrap(storeimpl.InUse())
	}
	// A release of an earlier claim frees no later one.
	return func() { s.claim.CompareAndSwap(c, nil) }, nil
}

// InsertPending implements store.Pending.
func (s *Store) InsertPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) (int64, error) {
	seq, err := s.insertPending(ctx, recipient, id, plaintext, nil)
	if err != nil {
		return 0, storeimpl.OpInsertPending.Wrap(err)
	}
	return seq, nil
}

// CommitSend implements store.State.
func (s *Store) CommitSend(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, update store.PeerState) (int64, error) {
	seq, err := s.insertPending(ctx, peer, id, plaintext, &update)
	if err != nil {
		return 0, storeimpl.OpCommitSend.Wrap(err)
	}
	return seq, nil
}

// CommitSendMany implements store.State.
func (s *Store) CommitSendMany(ctx context.Context, id store.LogicalMessageID, plaintext []byte, peers []store.PeerUpdate) ([]int64, error) {
	seqs := make([]int64, len(peers))
	err := s.tx(ctx, countedTransaction, func(t *txn) error {
		sends, err := storeimpl.SealPendingMany(s.keys, id, plaintext, peers)
		if err != nil {
			return err
		}
		for i, m := range sends {
			if seqs[i], err = insertRow(ctx, t.Queries, m.Peer, id, m.Message, &m.Update); err != nil {
				return err
			}
		}
		t.pending += int64(len(sends))
		return nil
	})
	if err != nil {
		return nil, storeimpl.OpCommitSendMany.Wrap(err)
	}
	return seqs, nil
}

// insertPending seals and inserts a pending message and, if update is not
// nil, saves the peer's state in the same transaction.
func (s *Store) insertPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, update *store.PeerState) (int64, error) {
	var seq int64
	err := s.tx(ctx, countedTransaction, func(t *txn) error {
		sealed, peer, err := storeimpl.SealPending(s.keys, recipient, id, plaintext, update)
		if err != nil {
			return err
		}
		if seq, err = insertRow(ctx, t.Queries, recipient, id, sealed, peer); err != nil {
			return err
		}
		t.pending++
		return nil
	})
	return seq, err
}

// insertRow inserts a sealed pending message and, if peer is not nil,
// applies the peer's sealed update, inside the caller's transaction.
func insertRow(ctx context.Context, q *db.Queries, recipient store.DeviceAddress, id store.LogicalMessageID, sealed []byte, peer *store.PeerState) (int64, error) {
	seq, err := q.InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
		RecipientUserID:   recipient.UserID,
		RecipientDeviceID: recipient.DeviceID,
		LogicalID:         id[:],
		Sealed:            sealed,
	})
	if isUniqueViolation(err) {
		return 0, storeimpl.Duplicate(recipient, id)
	}
	if err != nil {
		return 0, exhausted(ctx, q, err)
	}
	if peer == nil {
		return seq, nil
	}
	return seq, savePeer(ctx, q, recipient, *peer)
}

// PendingMessages implements store.Pending. It reads limit+1 rows and opens
// only the rows it returns; a row that does not open, or whose columns
// hold the wrong storage class, is returned as unreadable.
func (s *Store) PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingMessagePage{}, storeimpl.OpPagePending.Wrap(err)
	}
	after := req.After
	from, more := firstSequence(after)
	var page store.PendingMessagePage
	// A negative cursor is checked against the table in the same snapshot
	// as the page: two statements. Any other page is one.
	err := s.tx(ctx, readKind(after), func(q *txn) error {
		if err := checkCursor(ctx, q.Queries, after); err != nil || !more {
			return err
		}
		limit := int64(req.Limit) + 1
		var rows []decodedRow
		if req.Recipient == nil {
			all, err := q.PagePendingOutbound(ctx, db.PagePendingOutboundParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: from, RowLimit: limit})
			if err != nil {
				return err
			}
			rows = decodeRows(all)
		} else {
			to, err := q.PagePendingOutboundForRecipient(ctx, db.PagePendingOutboundForRecipientParams{
				SealedLimit:       storeimpl.MaxSealedMessageSize,
				RecipientUserID:   req.Recipient.UserID,
				RecipientDeviceID: req.Recipient.DeviceID,
				FromSequence:      from,
				RowLimit:          limit,
			})
			if err != nil {
				return err
			}
			rows = decodeRows(to)
		}
		page = s.page(rows, req.Limit, req.Recipient)
		return nil
	})
	if err != nil {
		return store.PendingMessagePage{}, storeimpl.OpPagePending.Wrap(err)
	}
	return page, nil
}

// pageRow is a row of either page query: the same columns.
type pageRow interface {
	db.PagePendingOutboundRow | db.PagePendingOutboundForRecipientRow
}

// decodeRows decodes the rows of a page query (decodePending), for page
// to open.
func decodeRows[R pageRow](rows []R) []decodedRow {
	out := make([]decodedRow, len(rows))
	for i, r := range rows {
		out[i] = decodePending(pendingRow(r))
	}
	return out
}

// readKind is the kind of a read from the cursor after: one statement,
// or for a negative cursor, which is checked against what the table holds
// (see checkCursor) in the read's snapshot, two in one transaction.
func readKind(after *int64) txKind {
	if after != nil && *after < 0 {
		return transaction
	}
	return statement
}

// firstSequence returns the smallest sequence a read that resumes after
// the cursor after includes (nil: from the start, which includes the
// smallest integer a damaged database may hold), and false if no sequence
// can follow after.
func firstSequence(after *int64) (int64, bool) {
	switch {
	case after == nil:
		return math.MinInt64, true
	case *after == math.MaxInt64:
		return 0, false
	}
	return *after + 1, true
}

// checkCursor refuses a negative cursor unless a row with a negative
// sequence is stored (see storeimpl.CheckCursor).
func checkCursor(ctx context.Context, q *db.Queries, after *int64) error {
	if after == nil || *after >= 0 {
		return nil
	}
	negative, err := q.PendingOutboundNegativeSequence(ctx)
	if err != nil {
		return err
	}
	return storeimpl.CheckCursor(*after, len(negative) > 0)
}

// PendingMessageCount implements store.Pending. The count of all pending
// messages is kept in memory and re-read with SELECT
// count(*) whenever another connection may have changed the table; a
// recipient's count is answered from the recipient index.
func (s *Store) PendingMessageCount(ctx context.Context, recipient *store.DeviceAddress) (int64, error) {
	if recipient != nil {
		if err := recipient.Validate(); err != nil {
			return 0, storeimpl.OpCountPending.Wrap(err)
		}
	}
	if recipient == nil {
		n, _, err := s.countAll(ctx)
		if err != nil {
			return 0, storeimpl.OpCountPending.Wrap(err)
		}
		return n, nil
	}
	var n int64
	err := s.tx(ctx, statement, func(q *txn) error {
		var err error
		n, err = q.CountPendingOutboundForRecipient(ctx, db.CountPendingOutboundForRecipientParams{
			RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID,
		})
		return err
	})
	if err != nil {
		return 0, storeimpl.OpCountPending.Wrap(err)
	}
	return n, nil
}

// AbandonPending implements store.Pending.
func (s *Store) AbandonPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
	if err := recipient.Validate(); err != nil {
		return false, storeimpl.OpAbandonPending.Wrap(err)
	}
	// One DELETE: SQLite's own transaction of the statement is the
	// abandon's one transaction.
	var n int64
	err := s.tx(ctx, countedStatement, func(t *txn) error {
		var err error
		n, err = deletePending(ctx, t.Queries, recipient, id)
		t.pending -= n
		return err
	})
	if err != nil {
		return false, storeimpl.OpAbandonPending.Wrap(err)
	}
	return n > 0, nil
}

// AbandonPendingMessage implements store.Pending, in one transaction.
func (s *Store) AbandonPendingMessage(ctx context.Context, m store.PendingMessage) (bool, error) {
	valid := m.Recipient.Validate()
	var n int64
	err := s.tx(ctx, countedTransaction, func(t *txn) error {
		rows, err := t.PagePendingOutbound(ctx, db.PagePendingOutboundParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: m.Sequence, RowLimit: 1})
		if err != nil {
			return err
		}
		if len(rows) == 1 && rows[0].Sequence == m.Sequence {
			if r := decodePending(pendingRow(rows[0])); r.to == m.Recipient && r.id == m.ID {
				n, err = t.DeletePendingOutboundSequence(ctx, m.Sequence)
				t.pending -= n
				return err
			}
		}
		if valid != nil {
			return nil // no identity to fall back on
		}
		n, err = deletePending(ctx, t.Queries, m.Recipient, m.ID)
		t.pending -= n
		return err
	})
	if err != nil {
		return false, storeimpl.OpAbandonPendingRow.On(m.Sequence).Wrap(err)
	}
	return n > 0, nil
}

// deletePending deletes the pending message (recipient, id) and returns
// how many rows went: more than one only if a damaged copy of it (another
// storage class, see DeletePendingOutbound) was stored beside it.
func deletePending(ctx context.Context, q *db.Queries, recipient store.DeviceAddress, id store.LogicalMessageID) (int64, error) {
	return q.DeletePendingOutbound(ctx, db.DeletePendingOutboundParams{
		RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID, LogicalID: id[:],
	})
}

// NextPendingMessage implements store.Pending.
func (s *Store) NextPendingMessage(ctx context.Context, recipient store.DeviceAddress, after *int64) (store.PendingMessage, error) {
	if err := recipient.Validate(); err != nil {
		return store.PendingMessage{}, storeimpl.OpNextPending.Wrap(err)
	}
	from, more := firstSequence(after)
	var m store.PendingMessage
	var bad *store.UnreadablePendingMessage
	err := s.tx(ctx, readKind(after), func(q *txn) error {
		if err := checkCursor(ctx, q.Queries, after); err != nil {
			return err
		}
		if !more {
			return sql.ErrNoRows
		}
		row, err := q.NextPendingOutboundForRecipient(ctx, db.NextPendingOutboundForRecipientParams{
			SealedLimit:     storeimpl.MaxSealedMessageSize,
			RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID, FromSequence: from,
		})
		if err != nil {
			return err
		}
		m, bad = s.openPending(pendingRow(row), &recipient)
		return nil
	})
	return onePending(storeimpl.OpNextPending, m, bad, err)
}

// PendingByID implements store.Pending.
func (s *Store) PendingByID(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID) (store.PendingMessage, error) {
	if err := recipient.Validate(); err != nil {
		return store.PendingMessage{}, storeimpl.OpPendingByID.Wrap(err)
	}
	var m store.PendingMessage
	var bad *store.UnreadablePendingMessage
	err := s.tx(ctx, statement, func(q *txn) error {
		row, err := q.PendingOutboundByID(ctx, db.PendingOutboundByIDParams{
			SealedLimit:     storeimpl.MaxSealedMessageSize,
			RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID, LogicalID: id[:],
		})
		if err != nil {
			return err
		}
		r := decodePending(pendingRow(row))
		if r.corrupt == "" && r.id != id {
			r.corrupt = fmt.Sprintf("logical id %s, read for %s", r.id, id)
		}
		m, bad = s.open(r, &recipient)
		return nil
	})
	return onePending(storeimpl.OpPendingByID, m, bad, err)
}

func isUniqueViolation(err error) bool {
	return sqlitedriver.IsUniqueConstraint(err)
}

// onePending is the answer of a read of one pending message: m, or
// store.ErrNotFound for no row, an *store.UnreadableError for a row that
// did not open (bad), or the read's error, each said as op's.
func onePending(op storeimpl.Op, m store.PendingMessage, bad *store.UnreadablePendingMessage, err error) (store.PendingMessage, error) {
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err == nil && bad != nil {
		err = &store.UnreadableError{Entries: []store.UnreadablePendingMessage{*bad}}
	}
	if err != nil {
		return store.PendingMessage{}, op.Wrap(err)
	}
	return m, nil
}
