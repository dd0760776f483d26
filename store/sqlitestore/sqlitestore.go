// Package sqlitestore opens the client's local SQLite database (Open),
// the store an application hands to client.Open: migrated to the head
// schema on open, every statement a sqlc-generated query from
// queries/*.sql, every sealed column a seal record bound to its row.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a
// transaction that returned is on disk and survives a process kill or a
// power loss; foreign keys are enforced. Every write is one transaction
// begun IMMEDIATE, so that two writers never deadlock upgrading a read
// lock.
//
// The store never runs OFFSET queries, never opens a sealed record it does
// not return, and never makes a network call.
package sqlitestore

import (
	"context"

	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/migration"
	impl "github.com/securemsg/storage/internal/sqlitestore"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Store is an open SQLite store: give it to client.Open, and Close it
// after the client.
type Store interface {
	store.Store
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
	// repairs the rows (SkippedRow.Pending gives a pending row's entry, whose
	// PendingMessage client.AbandonPendingMessage removes) and
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
	RotateKey(ctx context.Context, newKey seal.Key, batch int, progress func(store.RotationProgress)) error
}

// Open opens (creating if absent) the database at path, migrates it to the
// head schema, with WithLegacyUpgrade seals a pending queue left in the
// legacy plaintext layout by a database whose pending queue was never
// sealed (resuming an interrupted legacy migration, including its erase
// step), and checks that keys holds the database's
// storage key. Without WithLegacyUpgrade, a database holding the legacy
// layout is refused with ErrLegacyLayout before anything is changed. A
// database holding any schema object the migrations do not define (a
// planted trigger, view, table or index) is refused before anything is
// changed too.
//
// Every storage key verifier the store records carries a mark that tells
// the legacy migration to refuse a plaintext pending table found later. On a database sealed by a
// build that did not mark it, Open gives the active verifier of keys'
// current key the mark (one transaction, nothing else changed).
//
// path is first resolved to the file it names (every symbolic link
// followed; a dangling symbolic link is refused with an error wrapping
// fs.ErrNotExist), and everything below is done on that file. A new
// database file is created with mode 0600 (owner only) before SQLite
// opens it; SQLite gives its -wal and -shm files the database file's mode.
// An existing database file (and its -wal and -shm) readable or writable
// by group or others has those permission bits removed; a -wal, -shm or
// -journal that is a symbolic link is refused with ErrSymlink.
//
// The store holds the database file while it is open: a second Open of
// the same file, by any path, in this process or another (an app
// extension, say), fails at once with an error wrapping store.ErrInUse
// that names the file, until the store is closed or its process ends (a
// killed process leaves no stale hold). The hold is an exclusive flock on
// the sidecar file <file>-lock, created 0600 beside the database and left
// in place (never followed if it is a symbolic link: ErrSymlink), and, on
// unix, an flock on the database file itself, so that removing or
// replacing the sidecar lets no second store in. migrate up takes the
// same hold, while the read-only migrate commands (status, plan, drift)
// do not and work beside an open store.
//
// Bad input changes nothing, and leaves no file beside the path:
// "" and ":memory:" are refused with store.ErrInvalidArgument (the store
// needs a file); a directory, another kind of file or a file that is not
// a SQLite database with ErrNotDatabase; a read-only file or directory
// (no owner write permission, or none for this process) with an error
// matching fs.ErrPermission.
//
// Open records keys' current key as the storage key only for a database
// that records none and holds no sealed value. It returns an error
// wrapping store.ErrInUse if another store holds the file, the errors of
// bad input above, an error
// wrapping seal.ErrWrongKey if the database was sealed with a key keys
// does not hold, ErrNoKeyRecord if it records no active key but holds
// sealed values, store.ErrInvalidArgument for a nil keyring or an invalid
// option, seal.ErrKey for a keyring holding no key (the zero Keyring),
// ErrSequenceExhausted for a pending sequence high-water mark at the
// largest int64 (without WithSequenceRestart), ErrLegacyLayout,
// ErrUnknownObject (naming each) for
// a database holding a table, index, view or trigger that no migration
// defines, a legacy migration error (ErrPlaintextRefused for a
// plaintext table in a database whose pending queue was sealed or a
// set-aside table without its proof, ErrUnknownLayout,
// ErrKeyNotRecorded), or a migration error
// (ErrChecksum, ErrNewerDatabase, ErrUnknownState, ErrOutOfOrder).
func Open(ctx context.Context, path string, keys *seal.Keyring, opts ...Option) (Store, error) {
	o := make([]impl.Option, len(opts))
	for i, opt := range opts {
		o[i] = opt.o
	}
	s, err := impl.Open(ctx, path, keys, o...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Option configures Open.
type Option struct{ o impl.Option }

// WithLegacyUpgrade makes Open seal a pending queue left in the legacy
// plaintext layout, or resume such a migration. Without it Open refuses
// such a database with ErrLegacyLayout: a file writer who plants the
// plaintext layout (in a doctored copy with the key records removed, say)
// would otherwise have text of their choosing sealed with the user's key.
// Only the release that upgrades databases from the plaintext layout
// should pass it, and only until its users have started it once.
func WithLegacyUpgrade() Option { return Option{impl.WithLegacyUpgrade()} }

// WithLegacyProgress makes Open report the progress of a legacy plaintext
// migration (run only with WithLegacyUpgrade) to fn: when the legacy table
// is set aside (with the malformed rows erased instead of sealed, each
// with its sequence and reason), after every committed batch and when the
// erase step starts. fn runs on the goroutine calling Open. On a database
// with nothing to migrate it is never called.
func WithLegacyProgress(fn func(store.LegacyProgress)) Option {
	return Option{impl.WithLegacyProgress(fn)}
}

// WithLegacyBatch sets how many legacy rows Open seals per transaction
// (DefaultLegacyBatch if n is 0). A smaller batch commits more often; a
// kill loses at most one batch of work either way.
func WithLegacyBatch(n int) Option { return Option{impl.WithLegacyBatch(n)} }

// ErrLegacyLayout means the database holds a pending queue in the legacy
// plaintext layout (or a legacy migration under way) and Open was not
// given WithLegacyUpgrade. Nothing is changed. An application that never
// wrote the plaintext layout should treat it as a database doctored by
// someone else; the one release that upgrades from that layout passes
// WithLegacyUpgrade.
var ErrLegacyLayout = impl.ErrLegacyLayout

// ErrNoKeyRecord means the database records no active storage key but
// holds sealed values: its storage_key rows were deleted (or all marked
// retiring). No keyring can be proven right for it, so Open refuses it
// rather than adopting whatever key it is given; nothing is changed.
var ErrNoKeyRecord = impl.ErrNoKeyRecord

// ErrNotDatabase means the path Open was given is not a SQLite database
// file: a directory, another kind of file, or a file that does not start
// with SQLite's header. Nothing is changed and no file is left beside it.
var ErrNotDatabase = impl.ErrNotDatabase

// ErrSymlink means a file SQLite keeps beside the database (its -wal,
// -shm or -journal) or the store's lock file is a symbolic link. The store
// creates regular files only, so one was planted: it is never followed
// (SQLite would write, and Open would change the mode of, the file it
// names). Nothing is changed.
var ErrSymlink = impl.ErrSymlink

// DefaultRotationBatch is the batch RotateKey uses when given 0: rows
// re-sealed per transaction. A batch holds the database's write lock while
// it opens, seals and writes its rows, so the client's sends wait behind
// it; a thousand rows keep that wait short (5 to 12 ms for 1,000 pending
// messages of 200 bytes on a shared two-core machine) while the cost of a
// commit and its sync is spread over many rows.
const DefaultRotationBatch = impl.DefaultRotationBatch

// ErrSequenceExhausted means the pending sequence's high-water mark is at
// the largest int64, so no new pending message can be given a sequence.
// Only a writer other than the store can put it there (the store would
// take 2^63 sends). Open reports it and changes nothing, unless given
// WithSequenceRestart; a send that
// meets it stores nothing and returns it. The way out is Open with
// WithSequenceRestart, which keeps every stored message.
var ErrSequenceExhausted = impl.ErrSequenceExhausted

// WithSequenceRestart makes Open lower a pending sequence high-water mark
// found at the largest int64 to the highest sequence stored (0 if none),
// in the transaction that checks the key; no stored message changes.
// Sequences above the highest stored one that were handed out before
// (to messages since acknowledged or abandoned) may be handed out again:
// they cannot be told from a mark a writer raised. If a stored message
// holds the largest sequence itself, sends keep failing with
// ErrSequenceExhausted until the application removes it (a page lists
// it like any other; client.AbandonPendingMessage) and opens with
// WithSequenceRestart again.
func WithSequenceRestart() Option { return Option{impl.WithSequenceRestart()} }

// DefaultLegacyBatch is the batch WithLegacyBatch uses when given 0: legacy
// rows sealed per transaction.
const DefaultLegacyBatch = legacy.DefaultBatch

// Errors of the schema migration Open runs, and of the legacy plaintext
// migration it runs with WithLegacyUpgrade; each is wrapped with what it
// names, and Open changes nothing when it returns one.
var (
	// ErrChecksum means the embedded migration directory does not match
	// its atlas.sum.
	ErrChecksum = migration.ErrChecksum
	// ErrNewerDatabase means the database records a schema version newer
	// than this library's: it was opened by a newer release.
	ErrNewerDatabase = migration.ErrNewerDatabase
	// ErrUnknownState means the database holds tables but no schema
	// history this library can place it at.
	ErrUnknownState = migration.ErrUnknownState
	// ErrOutOfOrder means a migration file sits at or below the database's
	// version without being in its history.
	ErrOutOfOrder = migration.ErrOutOfOrder
	// ErrUnknownObject means the database holds a table, index, view or
	// trigger that no migration defines: something else created it (a
	// planted trigger would run inside the store's own transactions), so
	// the database is not used. The message names each object.
	ErrUnknownObject = migration.ErrUnknownObject
	// ErrPlaintextRefused means the database holds a plaintext pending
	// table the legacy migration may not seal (in a database whose
	// pending queue was sealed, or set aside without its proof). The
	// message names the table.
	ErrPlaintextRefused = legacy.ErrPlaintextRefused
	// ErrUnknownLayout means the pending table has neither the legacy
	// plaintext layout nor the sealed one.
	ErrUnknownLayout = legacy.ErrUnknownLayout
	// ErrKeyNotRecorded means the keyring's current key is not the key
	// the database records as active, so a legacy migration would seal
	// rows with another key than the rows before them.
	ErrKeyNotRecorded = legacy.ErrKeyNotRecorded
)
