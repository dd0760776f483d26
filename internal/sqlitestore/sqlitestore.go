// Package sqlitestore is the SQLite implementation of storage.Store (the
// one store/sqlitestore opens for an application): the
// client's local database, migrated to the head schema on open, every
// statement a sqlc-generated query from queries/*.sql, every sealed column
// a seal record bound to its row.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a
// transaction that returned is on disk and survives a process kill or a
// power loss; foreign keys are enforced. Every write is one transaction
// begun IMMEDIATE (so that two writers never deadlock upgrading a read
// lock), through the single helper in internal/sqltx.
//
// Package sqlitestore never runs OFFSET queries, never opens a sealed
// record it does not return, and never makes a network call.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/dblock"
	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/rowseal"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/storage"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Store is the SQLite store. It is safe for concurrent use.
type Store struct {
	conn   *sql.DB
	q      *db.Queries
	keys   *seal.Keyring
	closed atomic.Bool
	// lock is the database file's writer lock (lock.go), nil for an
	// in-memory database; claim is the client's claim (Claim).
	lock  *dblock.Lock
	claim atomic.Pointer[byte] // a byte, not a zero-size value: each claim distinct

	// sealMu is held shared by every write from the moment it seals until
	// its transaction ends, and exclusively by RotateKey while it switches
	// the sealing key: so no value sealed with the old key can be written
	// once a rotation has started walking the tables.
	sealMu sync.RWMutex

	// rotateMu serialises this store's key rotations (RotateKey).
	rotateMu sync.Mutex

	// count is the number of pending outbound rows (count.go).
	count pendingCount
}

var _ storage.Store = (*Store)(nil)

// DSN returns the go-sqlite3 data source name the store opens path with:
// immediate transactions, a busy timeout, foreign keys on, WAL,
// synchronous=FULL, a per-connection cache of prepared statements (the
// store runs the same few queries over and over), and a page cache of
// 2 MB (PageCacheKiB).
//
// The page cache size and memory mapping were chosen by measurement
// (cmd/pendingbench, BENCHMARKS.md): with pages at random cursors over a
// queue of a million, a 64 MiB cache changes nothing (nearly every page
// read is a first touch, which no cache holds), and mmap_size, which
// saves the read copies when warm, makes the first calls after a start
// ten times slower (each page fault reads ahead 128 KiB). So the cache
// stays at SQLite's default of 2 MB, stated here so that a change is
// deliberate, and the file is not memory-mapped (mmap_size 0, the
// build's default).
func DSN(path string) string {
	return "file:" + migration.URIPath(path) + "?_txlock=immediate&_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=FULL&_stmt_cache_size=32" +
		"&_cache_size=-" + strconv.Itoa(PageCacheKiB)
}

// PageCacheKiB is the most memory, in KiB, the store's connection uses
// for SQLite's page cache (PRAGMA cache_size = -PageCacheKiB).
const PageCacheKiB = 2000

// ErrNoKeyRecord is store/sqlitestore.ErrNoKeyRecord, which documents it.
var ErrNoKeyRecord = errors.New("store: database holds sealed values but records no active storage key")

// Option configures Open.
type Option func(*options)

type options struct {
	legacy   legacy.Options
	upgrade  bool // WithLegacyUpgrade
	restart  bool // WithSequenceRestart
	migrator *migration.Migrator
}

// ErrLegacyLayout is store/sqlitestore.ErrLegacyLayout, which documents it.
var ErrLegacyLayout = errors.New("store: database holds the legacy plaintext pending queue and the legacy upgrade was not requested")

// WithLegacyUpgrade is store/sqlitestore.WithLegacyUpgrade, which documents it.
func WithLegacyUpgrade() Option {
	return func(o *options) { o.upgrade = true }
}

// WithMigrator makes Open migrate the database with m instead of the
// directory embedded in package schema. It is for tools that prove a
// migration directory under review, before it is built into the
// application (cmd/migrate fixture-test -dir): an application opens its
// database with the embedded directory, the default.
func WithMigrator(m *migration.Migrator) Option {
	return func(o *options) { o.migrator = m }
}

// WithLegacyProgress is store/sqlitestore.WithLegacyProgress, which documents it.
func WithLegacyProgress(fn func(legacy.Progress)) Option {
	return func(o *options) { o.legacy.Progress = fn }
}

// WithLegacyBatch is store/sqlitestore.WithLegacyBatch, which documents it.
func WithLegacyBatch(n int) Option {
	return func(o *options) { o.legacy.Batch = n }
}

// Open implements store/sqlitestore.Open, which documents it, and returns
// the store with the methods of the storage contract and the tools'
// accessors (DB, Keyring, SequenceHighWater).
func Open(ctx context.Context, path string, keys *seal.Keyring, opts ...Option) (*Store, error) {
	if keys == nil {
		return nil, fmt.Errorf("store: open: %w: nil keyring", store.ErrInvalidArgument)
	}
	if len(keys.KeyIDs()) == 0 {
		// The zero Keyring: seal.NewKeyring makes every other one, and it
		// and Keyring.Add refuse the zero Key.
		return nil, fmt.Errorf("store: open: %w: the keyring holds no key (make it with seal.NewKeyring)", seal.ErrKey)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.legacy.Validate(); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if inMemory(path) {
		return nil, fmt.Errorf("store: open %q: %w: the store needs a database file (it runs in WAL mode and holds the file)", path, store.ErrInvalidArgument)
	}
	real, lock, err := holdFile(path)
	if err != nil {
		return nil, err
	}
	// go-sqlite3, or in this module's tests a driver wrapping it that
	// injects faults (internal/sqlitedriver).
	conn, err := sql.Open(sqlitedriver.Name(ctx), DSN(real))
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// One connection: the client is the database's only user, and a single
	// connection turns would-be SQLITE_BUSY contention into Go-side waits.
	conn.SetMaxOpenConns(1)
	s := &Store{conn: conn, q: db.New(conn), keys: keys, lock: lock}
	if err := s.init(ctx, o); err != nil {
		conn.Close()
		lock.Release()
		return nil, err
	}
	return s, nil
}

// privateFiles removes group and other permissions from the database file
// at path and its -wal and -shm (SQLite gives those the database file's
// mode when it creates them), and refuses (ErrSymlink) a -wal, -shm or
// -journal that is a symbolic link, before SQLite would follow it.
func privateFiles(path string) error {
	for _, name := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w", name, ErrSymlink)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(name, perm&^0o077); err != nil {
				return fmt.Errorf("restrict database file mode: %w", err)
			}
		}
	}
	return nil
}

func (s *Store) init(ctx context.Context, o options) error {
	var mode string
	if err := s.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("store: enable wal: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("store: enable wal: journal mode is %q", mode)
	}
	var fk int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		return fmt.Errorf("store: enable foreign keys: %v (foreign_keys=%d)", err, fk)
	}
	// Before the schema migrations, which would index a legacy table.
	if !o.upgrade {
		found, err := legacy.Found(ctx, s.conn)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if found {
			return ErrLegacyLayout
		}
	}
	m := o.migrator
	if m == nil {
		var err error
		if m, err = migration.Default(); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	// Before anything writes: a planted trigger would run inside the
	// store's own transactions from the first one on.
	var allow []migration.Object
	if o.upgrade {
		allow = legacy.SchemaObjects()
	}
	if err := m.CheckObjects(ctx, s.conn, allow...); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// A database from before sealing keeps its pending queue in plaintext:
	// seal it now, if asked to, between the migrations up to the version
	// its layout belongs to and the later ones (legacy.Upgrade). Before the
	// key check, which would record a marked key on a database that
	// records none (the migration records the key itself there) and marks
	// an unmarked verifier: either would make the migration refuse the
	// database.
	up := func() error { _, err := m.Up(ctx, s.conn); return err }
	if o.upgrade {
		up = func() error { _, err := legacy.Upgrade(ctx, s.conn, m, s.keys, o.legacy); return err }
	}
	if err := up(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// One transaction for what every open checks on a sealed database.
	return s.tx(ctx, inTx, func(q *txn) error {
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
// values without an active key record is refused (ErrNoKeyRecord): adopting
// the given key would make a wrong key the database's, and the right one
// fail from then on.
//
// It runs after the legacy migration, so the pending queue is sealed: an
// active verifier of the keyring's current key that seals the unmarked
// rowseal.KeyVerifierText (written by a build that did not mark it) is
// given the marked rowseal.KeyVerifierSealedQueue in the same transaction,
// so that package legacy refuses a plaintext table planted from then on.
func (s *Store) checkKey(ctx context.Context, q *db.Queries) error {
	rows, err := q.ListStorageKeys(ctx)
	if err != nil {
		return fmt.Errorf("store: read storage keys: %w", err)
	}
	active := 0
	for _, r := range rows {
		if r.State != "active" {
			continue
		}
		text, err := rowseal.OpenKeyVerifier(s.keys, seal.KeyID(r.KeyID), r.Verifier)
		if err != nil {
			return fmt.Errorf("store: storage key %d: %w", r.KeyID, err)
		}
		// A verifier is sealed by its own key, which seals only while
		// current: another key's waits until it is current (or a
		// rotation records it anew).
		if string(text) == rowseal.KeyVerifierText && seal.KeyID(r.KeyID) == s.keys.Current() {
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
		return fmt.Errorf("store: look for sealed values: %w", err)
	}
	if len(rows) > 0 || sealed != 0 {
		return fmt.Errorf("store: %d storage key rows, none active: %w", len(rows), ErrNoKeyRecord)
	}
	return s.addKey(ctx, q)
}

// markKey gives the record of keys' current key the marked verifier.
func (s *Store) markKey(ctx context.Context, q *db.Queries) error {
	id, v, err := rowseal.SealKeyVerifier(s.keys, []byte(rowseal.KeyVerifierSealedQueue))
	if err != nil {
		return fmt.Errorf("store: storage key %d: mark verifier: %w", id, err)
	}
	if err := q.UpdateStorageKeyVerifier(ctx, db.UpdateStorageKeyVerifierParams{Verifier: v, KeyID: int64(id)}); err != nil {
		return fmt.Errorf("store: storage key %d: mark verifier: %w", id, err)
	}
	return nil
}

// addKey records keys' current key as the active one, with the marked
// verifier (the store keeps its pending queue sealed).
func (s *Store) addKey(ctx context.Context, q *db.Queries) error {
	id, v, err := rowseal.SealKeyVerifier(s.keys, []byte(rowseal.KeyVerifierSealedQueue))
	if err != nil {
		return fmt.Errorf("store: record storage key: %w", err)
	}
	if err := q.InsertStorageKey(ctx, db.InsertStorageKeyParams{KeyID: int64(id), State: "active", Verifier: v, CreatedAt: time.Now().Unix()}); err != nil {
		return fmt.Errorf("store: record storage key: %w", err)
	}
	return nil
}

// Close closes the database and then releases its file (see Open). Calls
// after Close return store.ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := s.conn.Close()
	if lerr := s.lock.Release(); err == nil && lerr != nil {
		err = fmt.Errorf("store: release lock: %w", lerr)
	}
	return err
}

// Claim implements storage.Store.
func (s *Store) Claim() (func(), error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("store: claim: %w", store.ErrClosed)
	}
	c := new(byte)
	if !s.claim.CompareAndSwap(nil, c) {
		return nil, fmt.Errorf("store: claim: %w: the store already serves a client", store.ErrInUse)
	}
	// A release of an earlier claim frees no later one.
	return func() { s.claim.CompareAndSwap(c, nil) }, nil
}

// DB returns the underlying database, for read-only inspection in tests,
// tools and benchmarks. Writing through it bypasses the store's sealing,
// and pending rows inserted or deleted through it are not seen by the
// in-memory count of PendingMessageCount (it runs on the same connection, so
// PRAGMA data_version does not change).
func (s *Store) DB() *sql.DB { return s.conn }

// Keyring returns the keyring the store seals with.
func (s *Store) Keyring() *seal.Keyring { return s.keys }

// withConn runs fn on a connection held for the whole call, passing its
// identity: the driver connection (comparable with ==), so that fn knows
// which connection its statements run on (see pendingCount). q runs
// statements on that connection outside any transaction; inTx runs a
// function in one transaction on it (internal/sqltx).
func (s *Store) withConn(ctx context.Context, fn func(conn any, q *db.Queries, inTx func(func(q *db.Queries) error) error) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	c, err := s.conn.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer c.Close()
	var conn any
	if err := c.Raw(func(dc any) error { conn = dc; return nil }); err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	inTx := func(f func(q *db.Queries) error) error {
		return sqltx.Run(ctx, c, func(tx *sql.Tx) error { return f(s.q.WithTx(tx)) })
	}
	return fn(conn, db.New(c), inTx)
}

// InsertPending implements storage.Pending.
func (s *Store) InsertPending(ctx context.Context, recipient ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte) (int64, error) {
	seq, err := s.insertPending(ctx, recipient, id, plaintext, nil)
	if err != nil {
		return 0, fmt.Errorf("store: insert pending: %w", err)
	}
	return seq, nil
}

// CommitSend implements storage.State.
func (s *Store) CommitSend(ctx context.Context, peer ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte, update storage.PeerState) (int64, error) {
	seq, err := s.insertPending(ctx, peer, id, plaintext, &update)
	if err != nil {
		return 0, fmt.Errorf("store: commit send: %w", err)
	}
	return seq, nil
}

// CommitSendMany implements storage.State.
func (s *Store) CommitSendMany(ctx context.Context, id ids.LogicalMessageID, plaintext []byte, peers []storage.PeerUpdate) ([]int64, error) {
	s.sealMu.RLock()
	defer s.sealMu.RUnlock()
	sends, err := rowseal.InsertMany(s.keys, id, plaintext, peers)
	if err != nil {
		return nil, fmt.Errorf("store: commit send many: %w", err)
	}
	seqs := make([]int64, len(sends))
	err = s.writePending(ctx, func(q *db.Queries) (int64, error) {
		for i, m := range sends {
			var err error
			if seqs[i], err = insertRow(ctx, q, m.Peer, id, m.Message, &m.Update); err != nil {
				return 0, err
			}
		}
		return int64(len(sends)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: commit send many: %w", err)
	}
	return seqs, nil
}

// insertPending seals and inserts a pending message and, if update is not
// nil, saves the peer's state in the same transaction.
func (s *Store) insertPending(ctx context.Context, recipient ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte, update *storage.PeerState) (int64, error) {
	s.sealMu.RLock()
	defer s.sealMu.RUnlock()
	sealed, peer, err := rowseal.Insert(s.keys, recipient, id, plaintext, update)
	if err != nil {
		return 0, err
	}
	var seq int64
	err = s.writePending(ctx, func(q *db.Queries) (int64, error) {
		seq, err = insertRow(ctx, q, recipient, id, sealed, peer)
		return 1, err
	})
	return seq, err
}

// insertRow inserts a sealed pending message and, if peer is not nil,
// applies the peer's sealed update, inside the caller's transaction.
func insertRow(ctx context.Context, q *db.Queries, recipient ids.DeviceAddress, id ids.LogicalMessageID, sealed []byte, peer *storage.PeerState) (int64, error) {
	seq, err := q.InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
		RecipientUserID:   recipient.UserID,
		RecipientDeviceID: recipient.DeviceID,
		LogicalID:         id[:],
		Sealed:            sealed,
	})
	if isUniqueViolation(err) {
		return 0, fmt.Errorf("%s for %s: %w", id, recipient, store.ErrDuplicate)
	}
	if err != nil {
		return 0, exhausted(ctx, q, err)
	}
	if err != nil || peer == nil {
		return seq, err
	}
	return seq, savePeer(ctx, q, recipient, *peer)
}

// PendingMessages implements storage.Pending. It reads limit+1 rows and opens
// only the rows it returns; a row that does not open, or whose columns
// hold the wrong storage class, is returned as unreadable.
func (s *Store) PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingMessagePage{}, fmt.Errorf("store: page pending: %w", err)
	}
	after := req.After
	from, more := storage.FirstSequence(after)
	var all []db.PagePendingOutboundRow
	var to []db.PagePendingOutboundForRecipientRow
	// A negative cursor is checked against the table in the same snapshot
	// as the page: two statements. Any other page is one.
	err := s.tx(ctx, readKind(after), func(q *txn) error {
		if err := checkCursor(ctx, q.Queries, after); err != nil || !more {
			return err
		}
		limit := int64(req.Limit) + 1
		var err error
		if req.Recipient == nil {
			all, err = q.PagePendingOutbound(ctx, db.PagePendingOutboundParams{FromSequence: from, RowLimit: limit})
			return err
		}
		to, err = q.PagePendingOutboundForRecipient(ctx, db.PagePendingOutboundForRecipientParams{
			RecipientUserID:   req.Recipient.UserID,
			RecipientDeviceID: req.Recipient.DeviceID,
			FromSequence:      from,
			RowLimit:          limit,
		})
		return err
	})
	if err != nil {
		return store.PendingMessagePage{}, fmt.Errorf("store: page pending: %w", err)
	}
	if req.Recipient == nil {
		return rowseal.Page(s.keys, decodeRows(all), req.Limit), nil
	}
	return rowseal.Page(s.keys, decodeRows(to), req.Limit), nil
}

// pageRow is a row of either page query: the same columns.
type pageRow interface {
	db.PagePendingOutboundRow | db.PagePendingOutboundForRecipientRow
}

// decodeRows decodes the rows of a page query (decodePending), for
// rowseal.Page to open.
func decodeRows[R pageRow](rows []R) []rowseal.Row {
	out := make([]rowseal.Row, len(rows))
	for i, r := range rows {
		pr := pendingRow(r)
		to, id, sealed, bad := decodePending(pr)
		out[i] = rowseal.Row{Seq: pr.Sequence, To: to, ID: id, Sealed: sealed, Bad: bad}
	}
	return out
}

// readKind is the kind of a read from the cursor after: one statement,
// or for a negative cursor, which is checked against what the table holds
// (see checkCursor) in the read's snapshot, two in one transaction.
func readKind(after *int64) txKind {
	if after != nil && *after < 0 {
		return inTx
	}
	return oneRead
}

// checkCursor refuses a negative cursor unless a row with a negative
// sequence is stored (see storage.CheckCursor).
func checkCursor(ctx context.Context, q *db.Queries, after *int64) error {
	if after == nil || *after >= 0 {
		return nil
	}
	negative, err := q.PendingOutboundNegativeSequence(ctx)
	if err != nil {
		return err
	}
	return storage.CheckCursor(*after, len(negative) > 0)
}

// PendingMessageCount implements storage.Pending. The count of all pending
// messages is kept in memory (see pendingCount) and re-read with SELECT
// count(*) whenever another connection may have changed the table; a
// recipient's count is answered from the recipient index.
func (s *Store) PendingMessageCount(ctx context.Context, recipient *ids.DeviceAddress) (int64, error) {
	if recipient != nil {
		if err := storage.ValidateAddress(*recipient); err != nil {
			return 0, fmt.Errorf("store: count pending: %w", err)
		}
	}
	if recipient == nil {
		n, err := s.countAll(ctx)
		if err != nil {
			return 0, fmt.Errorf("store: count pending: %w", err)
		}
		return n, nil
	}
	var n int64
	err := s.tx(ctx, oneRead, func(q *txn) error {
		var err error
		n, err = q.CountPendingOutboundForRecipient(ctx, db.CountPendingOutboundForRecipientParams{
			RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID,
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: count pending: %w", err)
	}
	return n, nil
}

// AbandonPending implements storage.Pending.
func (s *Store) AbandonPending(ctx context.Context, recipient ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
	if err := storage.ValidateAddress(recipient); err != nil {
		return false, fmt.Errorf("store: delete pending: %w", err)
	}
	// One DELETE: SQLite's own transaction of the statement is the
	// abandon's one transaction.
	var n int64
	err := s.tx(ctx, onePendingWrite, func(t *txn) error {
		t.counted = true
		var err error
		n, err = deletePending(ctx, t.Queries, recipient, id)
		t.pending -= n
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: delete pending: %w", err)
	}
	return n > 0, nil
}

// AbandonPendingMessage implements storage.Pending, in one transaction.
func (s *Store) AbandonPendingMessage(ctx context.Context, m store.PendingMessage) (bool, error) {
	valid := storage.ValidateAddress(m.Recipient)
	var n int64
	err := s.writePending(ctx, func(q *db.Queries) (int64, error) {
		rows, err := q.PagePendingOutbound(ctx, db.PagePendingOutboundParams{FromSequence: m.Sequence, RowLimit: 1})
		if err != nil {
			return 0, err
		}
		if len(rows) == 1 && rows[0].Sequence == m.Sequence {
			to, id, _, _ := decodePending(pendingRow(rows[0]))
			if to == m.Recipient && id == m.ID {
				n, err = q.DeletePendingOutboundSequence(ctx, m.Sequence)
				return -n, err
			}
		}
		if valid != nil {
			return 0, nil // no identity to fall back on
		}
		n, err = deletePending(ctx, q, m.Recipient, m.ID)
		return -n, err
	})
	if err != nil {
		return false, fmt.Errorf("store: abandon pending sequence %d: %w", m.Sequence, err)
	}
	return n > 0, nil
}

// deletePending deletes the pending message (recipient, id) and returns
// how many rows went: more than one only if a damaged copy of it (another
// storage class, see DeletePendingOutbound) was stored beside it.
func deletePending(ctx context.Context, q *db.Queries, recipient ids.DeviceAddress, id ids.LogicalMessageID) (int64, error) {
	return q.DeletePendingOutbound(ctx, db.DeletePendingOutboundParams{
		RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID, LogicalID: id[:],
	})
}

// NextPendingMessage implements storage.Pending.
func (s *Store) NextPendingMessage(ctx context.Context, recipient ids.DeviceAddress, after *int64) (store.PendingMessage, error) {
	if err := storage.ValidateAddress(recipient); err != nil {
		return store.PendingMessage{}, fmt.Errorf("store: next pending: %w", err)
	}
	from, more := storage.FirstSequence(after)
	var row db.NextPendingOutboundForRecipientRow
	err := s.tx(ctx, readKind(after), func(q *txn) error {
		if err := checkCursor(ctx, q.Queries, after); err != nil {
			return err
		}
		if !more {
			return sql.ErrNoRows
		}
		var err error
		row, err = q.NextPendingOutboundForRecipient(ctx, db.NextPendingOutboundForRecipientParams{
			RecipientUserID: recipient.UserID, RecipientDeviceID: recipient.DeviceID, FromSequence: from,
		})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return store.PendingMessage{}, store.ErrNotFound
	}
	if err != nil {
		return store.PendingMessage{}, fmt.Errorf("store: next pending: %w", err)
	}
	m, bad := s.openPending(pendingRow(row))
	if bad != nil {
		return store.PendingMessage{}, &store.UnreadableError{Entries: []store.UnreadablePendingMessage{*bad}}
	}
	return m, nil
}

// SequenceHighWater returns the largest pending sequence ever handed out,
// deleted or not: the next insert gets a greater one.
func (s *Store) SequenceHighWater(ctx context.Context) (int64, error) {
	var hw int64
	err := s.tx(ctx, inTx, func(q *txn) error {
		var err error
		hw, err = q.PendingOutboundSequenceHighWater(ctx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: sequence high-water mark: %w", err)
	}
	return hw, nil
}

func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique
}
