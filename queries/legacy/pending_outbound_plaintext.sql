-- name: PendingOutboundColumns :many
-- The columns of pending_outbound_message, in order: a legacy table has
-- plaintext where version 14 has sealed.
SELECT name FROM pragma_table_info
WHERE arg = 'pending_outbound_message'
ORDER BY cid;

-- name: PendingOutboundIndexCount :one
-- 1 if the version-15 index exists (the database was migrated to 15).
SELECT count(*) FROM sqlite_master
WHERE type = 'index' AND name = 'pending_outbound_message_recipient';

-- name: SequenceHighWater :one
-- The AUTOINCREMENT high-water mark recorded for a table, 0 if none.
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS high_water
FROM sqlite_sequence
WHERE name = sqlc.arg(table_name);

-- name: LegacyPendingBatch :many
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, plaintext
FROM pending_outbound_message_plaintext
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: LegacyPendingMaxSequence :one
SELECT CAST(coalesce(max(sequence), 0) AS INTEGER) AS max_sequence
FROM pending_outbound_message_plaintext;

-- name: InsertSealedPendingWithSequence :exec
-- Copies one row into the sealed table, keeping its sequence.
INSERT INTO pending_outbound_message (sequence, recipient_user_id, recipient_device_id, logical_id, sealed)
VALUES (?, ?, ?, ?, ?);

-- name: DeleteSequenceHighWater :exec
DELETE FROM sqlite_sequence WHERE name = sqlc.arg(table_name);

-- name: InsertSequenceHighWater :exec
-- sqlite_sequence has no unique constraint: DeleteSequenceHighWater first.
INSERT INTO sqlite_sequence (name, seq) VALUES (sqlc.arg(table_name), sqlc.arg(seq));

-- name: ActiveStorageKeyIDs :many
-- The keys recorded as active: rows must be sealed with one of them.
SELECT key_id FROM storage_key WHERE state = 'active' ORDER BY key_id;

-- name: PlaintextTableCount :one
-- 1 while a migration is under way: the legacy table set aside and not
-- yet dropped (rows left to seal, or, once empty, the erase step still to
-- run). This table is the migration's durable resume marker.
SELECT count(*) FROM sqlite_master
WHERE type = 'table' AND name = 'pending_outbound_message_plaintext';

-- name: LegacyPendingCountAfter :one
-- The legacy rows left to seal: those above the last sequence sealed.
SELECT count(*) FROM pending_outbound_message_plaintext
WHERE sequence > sqlc.arg(after_sequence);

-- name: LegacyPendingCount :one
-- The rows of the set-aside table: 0 once the migration has emptied it and
-- only the erase step is owed.
SELECT count(*) FROM pending_outbound_message_plaintext;

-- name: SealedPendingCount :one
-- The rows already sealed by earlier batches (before the migration
-- completes, only the migration writes this table).
SELECT count(*) FROM pending_outbound_message;

-- name: SealedPendingMaxSequence :one
-- The last sequence sealed: batches copy in sequence order, so every
-- legacy row at or below it is sealed, and the next batch starts above it.
SELECT CAST(coalesce(max(sequence), -9223372036854775808) AS INTEGER) AS max_sequence
FROM pending_outbound_message;

-- name: LegacyPendingIdentityBatch :many
-- The identity columns of the legacy rows, without their plaintext: checked
-- before the first batch commits, so a malformed row changes nothing.
SELECT sequence, recipient_user_id, recipient_device_id, logical_id
FROM pending_outbound_message_plaintext
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

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
