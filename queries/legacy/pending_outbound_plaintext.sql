-- name: PendingOutboundColumns :many
-- The columns of pending_outbound_message, in order: a legacy table has
-- plaintext where version 14 has sealed.
SELECT name FROM pragma_table_info
WHERE arg = 'pending_outbound_message'
ORDER BY cid;

-- name: SequenceHighWater :one
-- The AUTOINCREMENT high-water mark recorded for a table, 0 if none.
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS high_water
FROM sqlite_sequence
WHERE name = sqlc.arg(table_name);

-- name: LegacyPendingBatch :many
-- The set-aside rows from first_sequence on (inclusive, so that a row at
-- the smallest int64 is read too), in sequence order.
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, plaintext
FROM pending_outbound_message_plaintext
WHERE sequence >= sqlc.arg(first_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: InsertSealedPendingWithSequence :exec
-- Copies one row into the sealed table, keeping its sequence.
INSERT INTO pending_outbound_message (sequence, recipient_user_id, recipient_device_id, logical_id, sealed)
VALUES (?, ?, ?, ?, ?);

-- name: DeleteSequenceHighWater :exec
DELETE FROM sqlite_sequence WHERE name = sqlc.arg(table_name);

-- name: InsertSequenceHighWater :exec
-- sqlite_sequence has no unique constraint: DeleteSequenceHighWater first.
INSERT INTO sqlite_sequence (name, seq) VALUES (sqlc.arg(table_name), sqlc.arg(seq));

-- name: StorageKeys :many
-- The storage key records. A migration starts beside them only if every
-- verifier is the unmarked legacy-era one; its first step records the key
-- it seals with (or replaces that key's verifier), the verifier carrying
-- the proof that this package set the legacy table aside (see package
-- legacy).
SELECT key_id, state, verifier FROM storage_key ORDER BY key_id;

-- name: InsertStorageKey :exec
-- Records the key a migration seals with, in the transaction that sets the
-- legacy table aside, on a database that records no key before it.
INSERT INTO storage_key (key_id, state, verifier, created_at)
VALUES (sqlc.arg(key_id), 'active', sqlc.arg(verifier), sqlc.arg(created_at));

-- name: UpdateStorageKeyVerifier :exec
-- Replaces the verifier of the key a migration seals with: its proof names
-- the set-aside rows, then none once they are emptied, and the marked
-- verifier once the set-aside table is dropped.
UPDATE storage_key SET verifier = sqlc.arg(verifier) WHERE key_id = sqlc.arg(key_id);

-- name: SealedState :one
-- What makes a database sealed besides its pending outbound queue: the
-- storage key records, the local identity, and the rows of every other
-- table with a sealed column (every sealed column is NOT NULL, so a row is
-- a sealed value). Where the database records no storage key, a migration
-- starts only if the other two are 0.
SELECT
  CAST((SELECT count(*) FROM storage_key) AS INTEGER) AS storage_keys,
  CAST((SELECT count(*) FROM local_identity) AS INTEGER) AS local_identities,
  CAST((SELECT count(*) FROM identity_pin)
     + (SELECT count(*) FROM session)
     + (SELECT count(*) FROM session_initiation)
     + (SELECT count(*) FROM pending_inbound_message) AS INTEGER) AS sealed_rows;

-- name: PlaintextTableCount :one
-- 1 while a migration is under way: the legacy table set aside and not
-- yet dropped (rows left to seal, or, once empty, the erase step still to
-- run). This table is the migration's durable resume marker.
SELECT count(*) FROM sqlite_master
WHERE type = 'table' AND name = 'pending_outbound_message_plaintext';

-- name: LegacyPendingCountFrom :one
-- The legacy rows left to seal: those from the first sequence not yet
-- sealed on.
SELECT count(*) FROM pending_outbound_message_plaintext
WHERE sequence >= sqlc.arg(first_sequence);

-- name: SealedPendingProgress :one
-- The rows already sealed by earlier batches (before the migration
-- completes, only the migration writes this table) and the last sequence
-- sealed (0 when none is): batches copy in sequence order, so every legacy
-- row at or below it is sealed, and the next batch starts above it.
SELECT
  CAST(count(*) AS INTEGER) AS sealed,
  CAST(coalesce(max(sequence), 0) AS INTEGER) AS max_sequence
FROM pending_outbound_message;

-- name: LegacyPendingShapeBatch :many
-- The storage class of each column of the set-aside rows (the legacy table
-- declares types but SQLite does not enforce them), read before their
-- values so that a row of the wrong class is found without scanning it.
SELECT sequence,
  CAST(typeof(recipient_user_id) AS TEXT) AS user_class,
  CAST(typeof(recipient_device_id) AS TEXT) AS device_class,
  CAST(typeof(logical_id) AS TEXT) AS logical_id_class,
  CAST(typeof(plaintext) AS TEXT) AS plaintext_class
FROM pending_outbound_message_plaintext
WHERE sequence >= sqlc.arg(first_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: DeleteLegacyPending :exec
-- Erases one malformed row from the set-aside table, in the transaction
-- that sets it aside (the erase step later removes its pages from the
-- file).
DELETE FROM pending_outbound_message_plaintext WHERE sequence = sqlc.arg(sequence);

-- name: DeleteAllLegacyPending :exec
-- Empties the set-aside table once every row is sealed, in the transaction
-- that restores the high-water mark (a DELETE without WHERE drops the
-- table's pages at once); the empty table stays as the marker that the
-- erase step is owed.
DELETE FROM pending_outbound_message_plaintext;

-- name: SetAsideIndexCount :one
-- 1 if the version-15 index is on the set-aside legacy table (the database
-- was migrated to 15 before the legacy migration started): it must be moved
-- to the sealed table when the sealing completes.
SELECT count(*) FROM sqlite_master
WHERE type = 'index' AND name = 'pending_outbound_message_recipient'
  AND tbl_name = 'pending_outbound_message_plaintext';

-- name: CacheSize :one
-- PRAGMA cache_size of this connection, read as its table-valued function
-- (negative: KiB; positive: pages), so that the erase step can set it
-- back.
SELECT cache_size FROM pragma_cache_size;

-- name: LegacySequenceFaults :one
-- What makes a legacy pending_outbound_message's sequence column unusable
-- as the one cursor and key of the queue: values that are not integers
-- (NULL, TEXT, REAL, BLOB) and integers held by more than one row. A table
-- whose sequence is its rowid, as the legacy client's was, has neither;
-- one declared otherwise (SQLite types are not enforced) may hold both,
-- and a migration reading in sequence order would skip such rows.
SELECT
  CAST((SELECT count(*) FROM pending_outbound_message
        WHERE typeof(sequence) <> 'integer') AS INTEGER) AS not_integer,
  CAST((SELECT count(*) - count(DISTINCT sequence) FROM pending_outbound_message
        WHERE typeof(sequence) = 'integer') AS INTEGER) AS repeated;

-- name: LegacyPendingRepeatedIdentity :many
-- The set-aside rows whose recipient and logical id an earlier row holds
-- too, each with the first sequence that holds them: the sealed table's
-- UNIQUE (recipient_user_id, recipient_device_id, logical_id) refuses the
-- later ones, which a legacy table without that constraint may hold.
-- Compared as that constraint does (BINARY), whatever collation the legacy
-- table declares.
SELECT later.sequence, CAST(min(earlier.sequence) AS INTEGER) AS first_sequence
FROM pending_outbound_message_plaintext AS later
JOIN pending_outbound_message_plaintext AS earlier
  ON earlier.recipient_user_id = later.recipient_user_id COLLATE BINARY
  AND earlier.recipient_device_id = later.recipient_device_id
  AND earlier.logical_id = later.logical_id
  AND earlier.sequence < later.sequence
GROUP BY later.sequence
ORDER BY later.sequence;
