-- The pending inbound queue: each received message, sealed, from the
-- commit that decrypted it until the application finalizes or discards
-- it. Its sequence is the table's rowid (AUTOINCREMENT: one persisted,
-- never reused sequence of its own, the cursor of its pages).

-- name: InsertPendingInbound :execlastid
-- Stores a received message as pending inbound and returns its sequence.
-- An exec, not RETURNING, as InsertPendingOutbound.
INSERT INTO pending_inbound_message (sender_user_id, sender_device_id, logical_id, sealed)
VALUES (?, ?, ?, ?);

-- name: PendingInboundSequence :many
-- The sequence of the pending inbound message (sender, id), if it is
-- still pending: a copy that arrives before the application finalized it
-- is given again by reference to this row. The CAST line holds the
-- sender's user id to the bytes asked for, whatever collation the column
-- declares, as DeletePendingOutbound does; the row is judged by the row
-- itself (queries/README.md): the index proposes, the table row at its
-- rowid decides.
SELECT pending_inbound_message.sequence
FROM pending_inbound_message
WHERE pending_inbound_message.sender_user_id = sqlc.arg(sender_user_id)
  AND pending_inbound_message.sender_device_id = sqlc.arg(sender_device_id)
  AND pending_inbound_message.logical_id = sqlc.arg(logical_id)
  AND EXISTS (SELECT 1 FROM pending_inbound_message AS own NOT INDEXED
              WHERE own.rowid = pending_inbound_message.rowid
                AND own.sender_user_id = sqlc.arg(sender_user_id)
                AND own.sender_device_id = sqlc.arg(sender_device_id)
                AND own.logical_id = sqlc.arg(logical_id)
                AND CAST(own.sender_user_id AS BLOB) = CAST(sqlc.arg(sender_user_id) AS BLOB));

-- name: PagePendingInbound :many
-- One keyset page of pending inbound messages, all senders, in sequence
-- order, from from_sequence on; row_limit is the page's limit + 1 (the
-- probe row). Columns wrapped in likely, as in PagePendingOutbound, so
-- that the store gets each value with its storage class; the sealed value
-- is measured before it is read (queries/README.md).
SELECT sequence,
       likely(sender_user_id) AS sender_user_id,
       likely(sender_device_id) AS sender_device_id,
       likely(logical_id) AS logical_id,
       likely(CASE WHEN octet_length(sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN sealed END) AS sealed,
       octet_length(sealed) AS sealed_size
FROM pending_inbound_message
WHERE sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: PagePendingInboundForSender :many
-- The same page for one sender. It reads the sender's entries of the
-- table's unique index (sender, device, logical id) and sorts them by
-- sequence: a cost in the sender's pending inbound messages, which the
-- application finalizes as it handles them, so it holds few.
SELECT sequence,
       likely(sender_user_id) AS sender_user_id,
       likely(sender_device_id) AS sender_device_id,
       likely(logical_id) AS logical_id,
       likely(CASE WHEN octet_length(sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN sealed END) AS sealed,
       octet_length(sealed) AS sealed_size
FROM pending_inbound_message
WHERE sender_user_id = sqlc.arg(sender_user_id)
  AND sender_device_id = sqlc.arg(sender_device_id)
  AND sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: PendingInboundNegativeSequence :many
-- A sequence below zero if any row has one (only a damaged database holds
-- one), which makes a negative cursor valid.
SELECT sequence FROM pending_inbound_message WHERE sequence < 0 LIMIT 1;

-- name: CountPendingInbound :one
-- Counts read no sealed column: SQLite answers them from an index.
SELECT count(*) FROM pending_inbound_message;

-- name: CountPendingInboundForSender :one
SELECT count(*)
FROM pending_inbound_message
WHERE sender_user_id = sqlc.arg(sender_user_id)
  AND sender_device_id = sqlc.arg(sender_device_id);

-- name: DeletePendingInbound :many
-- Finalize and discard remove the row at one sequence, whatever its
-- columns hold (an unreadable row too), without opening it, and return
-- the sender and logical id it held, with their storage class, for the
-- ACK that follows the commit.
DELETE FROM pending_inbound_message
WHERE sequence = sqlc.arg(sequence)
RETURNING likely(sender_user_id) AS sender_user_id,
          likely(sender_device_id) AS sender_device_id,
          likely(logical_id) AS logical_id;

-- name: DeletePendingInboundFrom :execrows
-- Every pending inbound message of one sender device (ForgetPeer), without
-- opening any, found through the queue's unique index and judged by the
-- row itself.
DELETE FROM pending_inbound_message
WHERE pending_inbound_message.sender_user_id = sqlc.arg(sender_user_id)
  AND pending_inbound_message.sender_device_id = sqlc.arg(sender_device_id)
  AND EXISTS (SELECT 1 FROM pending_inbound_message AS own NOT INDEXED
              WHERE own.rowid = pending_inbound_message.rowid
                AND own.sender_user_id = sqlc.arg(sender_user_id)
                AND own.sender_device_id = sqlc.arg(sender_device_id));

-- name: DeletePendingInboundProcessed :many
-- DeletePendingInbound of a row whose id is recorded as processed, as
-- every row a receive stores is: one statement, committed on its own. A
-- row without one (written by an older release) is left for
-- DeletePendingInbound, which runs with InsertProcessedInbound in one
-- transaction. The processed id is compared byte for byte, on the
-- processed table's own row (queries/README.md).
DELETE FROM pending_inbound_message
WHERE sequence = sqlc.arg(sequence)
  AND EXISTS (
    SELECT 1 FROM processed_inbound_message AS p
    WHERE p.sender_user_id = pending_inbound_message.sender_user_id
      AND p.sender_device_id = pending_inbound_message.sender_device_id
      AND p.logical_id = pending_inbound_message.logical_id
      AND EXISTS (SELECT 1 FROM processed_inbound_message AS own NOT INDEXED
                  WHERE own.rowid = p.rowid
                    AND own.sender_user_id = pending_inbound_message.sender_user_id
                    AND own.sender_device_id = pending_inbound_message.sender_device_id
                    AND own.logical_id = pending_inbound_message.logical_id
                    AND CAST(own.sender_user_id AS BLOB) = CAST(pending_inbound_message.sender_user_id AS BLOB)))
RETURNING likely(sender_user_id) AS sender_user_id,
          likely(sender_device_id) AS sender_device_id,
          likely(logical_id) AS logical_id;
