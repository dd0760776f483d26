-- name: InsertPendingOutbound :one
-- Stores a sent message as pending. AUTOINCREMENT hands out a sequence
-- above every one handed out before, deleted ones included.
INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
VALUES (?, ?, ?, ?)
RETURNING sequence;

-- name: PagePendingOutbound :many
-- One keyset page of pending messages, all recipients, in sequence order.
-- The caller passes row_limit = limit + 1: the extra row only says whether
-- another page follows (never a positional skip).
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: PagePendingOutboundForRecipient :many
-- The same page for one recipient, its own query (not an optional
-- predicate) so that it walks pending_outbound_message_recipient.
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: NextPendingOutboundForRecipient :one
-- The next pending message for one recipient after a cursor: a retry
-- reads one message per transaction.
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT 1;

-- name: CountPendingOutbound :one
-- Counts read no sealed column: SQLite answers them from an index.
SELECT count(*) FROM pending_outbound_message;

-- name: PendingOutboundDataVersion :one
-- PRAGMA data_version of this connection: it changes when another
-- connection commits to the database, so the store's in-memory count of
-- pending messages knows when it may have gone stale.
SELECT data_version FROM pragma_data_version;

-- name: CountPendingOutboundForRecipient :one
-- Counts one recipient's pending messages from the covering index.
SELECT count(*)
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id);

-- name: DeletePendingOutbound :execrows
-- Abandon and ACK delete without opening the sealed record; the affected
-- row count (0 or 1) decides ABANDONED / NOT_PENDING and cleared.
DELETE FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND logical_id = sqlc.arg(logical_id);

-- name: PendingOutboundSequenceHighWater :one
-- The AUTOINCREMENT high-water mark: the largest sequence ever handed out.
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS high_water
FROM sqlite_sequence
WHERE name = 'pending_outbound_message';

-- name: SealedPendingOutboundBatch :many
-- Key rotation walks the table in sequence order, in batches.
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: UpdatePendingOutboundSealed :exec
UPDATE pending_outbound_message SET sealed = sqlc.arg(sealed) WHERE sequence = sqlc.arg(sequence);
