-- Pending outbound messages: sent and not yet acknowledged.
-- Pages are keyset pages on the global sequence, never OFFSET: they read
-- limit + 1 rows (the caller passes row_limit = limit + 1) to learn whether
-- another page follows.

-- name: InsertPendingOutbound :one
INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
VALUES (?, ?, ?, ?)
RETURNING sequence;

-- name: PagePendingOutbound :many
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: PagePendingOutboundForRecipient :many
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: NextPendingOutboundForRecipient :one
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT 1;

-- Counts read no sealed column: SQLite answers them from an index.

-- name: CountPendingOutbound :one
SELECT count(*) FROM pending_outbound_message;

-- name: CountPendingOutboundForRecipient :one
SELECT count(*)
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id);

-- Abandon and ACK delete without opening the sealed record; the affected
-- row count (0 or 1) decides ABANDONED / NOT_PENDING and cleared.

-- name: DeletePendingOutbound :execrows
DELETE FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND logical_id = sqlc.arg(logical_id);

-- name: PendingOutboundSequenceHighWater :one
-- The AUTOINCREMENT high-water mark: the largest sequence ever handed out.
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS high_water
FROM sqlite_sequence
WHERE name = 'pending_outbound_message';

-- Key rotation walks the table in sequence order, in batches.

-- name: SealedPendingOutboundBatch :many
SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message
WHERE sequence > sqlc.arg(after_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: UpdatePendingOutboundSealed :exec
UPDATE pending_outbound_message SET sealed = sqlc.arg(sealed) WHERE sequence = sqlc.arg(sequence);
