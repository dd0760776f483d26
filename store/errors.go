package store

import "errors"

// Errors the stores return, checked with errors.Is: those of every call,
// then those of the SQLite store's Open and RotateKey alone. The errors
// of the schema a database holds (a checksum, a newer database, an object
// no migration defines) are package schema's.
var (
	// ErrInvalidArgument means a call was given a malformed argument (a
	// page limit outside 1..MaxPageSize, a negative cursor, a malformed
	// address or id). Nothing was changed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound means the record asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate means a pending message with the same recipient and
	// logical id already exists.
	ErrDuplicate = errors.New("duplicate pending message")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("closed")
	// ErrInUse means the store, or its database file, already serves
	// another user: a second client on one store (Claim), or a second
	// open of a database file that an open store holds (sqlitestore.Open).
	// Nothing was changed. Two users of one state would each cache the
	// sessions and encrypt under the same message keys.
	ErrInUse = errors.New("in use")
	// ErrUnreadable means pending rows could not be opened; it is matched
	// by an *UnreadableError, which lists them.
	ErrUnreadable = errors.New("unreadable pending message")
	// ErrCorruptRow means a pending row's columns hold values the schema
	// never stores: the wrong storage class (a recipient stored as a BLOB,
	// say, which would escape the per-recipient index) or a value out of
	// bounds (a malformed recipient, a logical id of the wrong length). It
	// is the cause of an UnreadablePendingMessage. The local identity's
	// row is held to its storage classes the same way (LocalIdentity), and
	// a key rotation reports every such row it skips with it.
	ErrCorruptRow = errors.New("corrupt pending row")
	// ErrCorruptIndex means an index of the SQLite store's file disagrees
	// with its table: a write found through the index a row that is not
	// the one it names (an upsert of one device's state, an inbound
	// message's processed id), or Store.Verify found an index whose
	// entries are not its table's rows. A writer of the file made it so;
	// nothing was changed. The memory store never returns it.
	ErrCorruptIndex = errors.New("index disagrees with its table")
	// ErrPeerUnreadable means part of a remote device's stored state (its
	// session, unanswered initiation or identity pin) could not be opened,
	// or (as the client reports it) opened but could not be decoded. It is
	// matched by a *PeerUnreadableError, which says which parts and why;
	// client.Client.DiscardUnreadablePeerState removes exactly those parts.
	ErrPeerUnreadable = errors.New("unreadable peer state")
	// ErrPeerChanged means a remote device's state changed between the
	// read that found parts of it damaged and their removal, so nothing
	// was removed: client.Client.DiscardUnreadablePeerState can be called
	// again.
	ErrPeerChanged = errors.New("peer state changed since it was read")

	// ErrRowsSkipped means a key rotation finished but left rows it could not
	// open as they were. It is matched by the *RotationError RotateKey
	// returns, which lists them.
	ErrRowsSkipped = errors.New("rows skipped: they could not be opened")

	// ErrNotDatabase means the path sqlitestore.Open was given is not a
	// SQLite database file: a directory, another kind of file, or a file
	// that does not start with SQLite's header. Nothing is changed and no
	// file is left beside it.
	ErrNotDatabase = errors.New("not a SQLite database file")
	// ErrSymlink means a file SQLite keeps beside the database (its -wal,
	// -shm or -journal) or the store's lock file is a symbolic link, or
	// the -wal, -shm or -journal is a hard link (a file with another
	// name too). The store creates files of one name only, so one was
	// planted: it is never used (SQLite would write, and Open would
	// change the mode of, the other file). Nothing is changed.
	ErrSymlink = errors.New("database side file is a symbolic link")
	// ErrNoKeyRecord means the database records no active storage key
	// but holds sealed values: its storage_key rows were deleted (or all
	// marked retiring). No keyring can be proven right for it, so
	// sqlitestore.Open refuses it rather than adopting whatever key it is
	// given; nothing is changed.
	ErrNoKeyRecord = errors.New("database holds sealed values but records no active storage key")
	// ErrSequenceExhausted means the pending sequence's high-water mark
	// is at the largest int64, so no new pending message can be given a
	// sequence. Only a writer other than the store can put it there (the
	// store would take 2^63 sends). sqlitestore.Open reports it once it
	// has migrated the file (the migrations stay committed) and leaves the
	// mark as it is, unless given sqlitestore.WithSequenceRestart; a send
	// that meets it stores nothing and returns it.
	ErrSequenceExhausted = errors.New("pending sequence exhausted (its high-water mark is at the largest int64)")

	// ErrLegacyLayout means the database holds a pending queue in the
	// legacy plaintext layout (or a legacy migration under way) and
	// sqlitestore.Open was not given WithLegacyUpgrade. Nothing is
	// changed. An application that never wrote the plaintext layout
	// should treat it as a database doctored by someone else; the one
	// release that upgrades from that layout passes WithLegacyUpgrade.
	ErrLegacyLayout = errors.New("database holds the legacy plaintext pending queue and the legacy upgrade was not requested")
	// ErrUnknownLayout means pending_outbound_message has neither the
	// legacy plaintext layout nor the sealed one, or has the legacy layout
	// in a database above the version that layout belongs to.
	ErrUnknownLayout = errors.New("unknown pending_outbound_message layout")
	// ErrKeyNotRecorded means the keyring's current key is not the
	// database's active storage key: a legacy migration under way
	// recorded another key (the rows left would be sealed with another
	// key than the rows before them), or a legacy database sealed before
	// its pending queue records another key as active (or none). Nothing
	// is changed.
	ErrKeyNotRecorded = errors.New("keyring's current key is not the database's active storage key")
	// ErrPlaintextRefused means the database holds a plaintext pending
	// table the legacy upgrade may not seal: the legacy layout in a
	// database whose pending queue was sealed (or whose storage key
	// verifier does not open with the keyring: the error then also wraps
	// the seal error), or that holds a local identity or sealed rows but
	// records no storage key; a set-aside
	// pending_outbound_message_plaintext without the proof that it was
	// set aside with the keyring's current key (or whose rows changed
	// since); or both tables at once. The message names the table.
	// Nothing is changed, sealed or listed.
	ErrPlaintextRefused = errors.New("plaintext table refused")
)
