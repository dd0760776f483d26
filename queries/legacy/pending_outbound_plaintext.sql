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

-- name: LegacyPendingCount :one
-- The legacy rows left to seal.
SELECT count(*) FROM pending_outbound_message_plaintext;

-- name: SealedPendingCount :one
-- The rows already sealed by earlier batches (before the migration
-- completes, only the migration writes this table).
SELECT count(*) FROM pending_outbound_message;

-- name: LegacyPendingIdentityBatch :many
-- The identity columns of the legacy rows, without their plaintext: checked
-- before the first batch commits, so a malformed row changes nothing.
SELECT sequence, recipient_user_id, recipient_device_id, logical_id
FROM pending_outbound_message_plaintext
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: DeleteLegacyPendingThrough :exec
-- Removes the legacy rows a batch has just sealed, in the batch's
-- transaction: a row is in exactly one of the two tables at every commit.
DELETE FROM pending_outbound_message_plaintext
WHERE sequence <= sqlc.arg(through_sequence);
