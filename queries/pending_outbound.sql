-- name: InsertPendingOutbound :execlastid
-- Stores a sent message as pending and returns its sequence (the rowid).
-- AUTOINCREMENT hands out a sequence above every one handed out before,
-- deleted ones included. An exec, not RETURNING: SQLite buffers RETURNING
-- rows in a temporary table, and database/sql watches every result set
-- read inside a transaction with a goroutine of its own (together about
-- twice the cost of the insert itself).
INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
VALUES (?, ?, ?, ?);

-- name: PagePendingOutbound :many
-- One keyset page of pending messages, all recipients, in sequence order,
-- from from_sequence on (the cursor + 1, or the smallest integer for a
-- page from the start). The caller passes row_limit = limit + 1: the extra
-- row only says whether another page follows (never a positional skip).
-- Each column is wrapped in likely, a no-op that the SQLite code generator
-- removes, so that sqlc types it as an interface and the store gets the
-- value with its storage class: a row whose values have another class
-- than the schema declares (a BLOB recipient, say) is reported as
-- unreadable instead of failing the page or opening as if it were fine.
-- Checking the class in Go costs nothing in SQL, where four typeof calls
-- per row measured about 0.7 microseconds a row.
-- A value is measured before it is read: a sealed value longer than
-- sealed_limit (the largest record the store writes) is not read at all
-- (NULL), only its size, which octet_length takes from the record header
-- without loading the value's overflow pages; the store reports the row
-- unreadable. The same two columns in every query that reads a message's
-- sealed value (queries/README.md, "A value is measured before it is
-- read").
SELECT sequence,
       likely(recipient_user_id) AS recipient_user_id,
       likely(recipient_device_id) AS recipient_device_id,
       likely(logical_id) AS logical_id,
       likely(CASE WHEN octet_length(sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN sealed END) AS sealed,
       octet_length(sealed) AS sealed_size
FROM pending_outbound_message
WHERE sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: PagePendingOutboundForRecipient :many
-- The same page for one recipient, its own query (not an optional
-- predicate) so that it walks pending_outbound_message_recipient.
SELECT sequence,
       likely(recipient_user_id) AS recipient_user_id,
       likely(recipient_device_id) AS recipient_device_id,
       likely(logical_id) AS logical_id,
       likely(CASE WHEN octet_length(sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN sealed END) AS sealed,
       octet_length(sealed) AS sealed_size
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: NextPendingOutboundForRecipient :one
-- The next pending message for one recipient from from_sequence on: a
-- retry reads one message per transaction. Columns as in the pages.
SELECT sequence,
       likely(recipient_user_id) AS recipient_user_id,
       likely(recipient_device_id) AS recipient_device_id,
       likely(logical_id) AS logical_id,
       likely(CASE WHEN octet_length(sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN sealed END) AS sealed,
       octet_length(sealed) AS sealed_size
FROM pending_outbound_message
WHERE recipient_user_id = sqlc.arg(recipient_user_id)
  AND recipient_device_id = sqlc.arg(recipient_device_id)
  AND sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT 1;

-- name: PendingOutboundNegativeSequence :many
-- A sequence below zero if any row has one (never handed out: only a
-- damaged database holds one), which makes a negative cursor valid.
SELECT sequence FROM pending_outbound_message WHERE sequence < 0 LIMIT 1;

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
-- row count decides ABANDONED / NOT_PENDING and cleared. The IN lists
-- also match a row naming the same recipient and id with a user id,
-- device id or logical id of the wrong storage class (a BLOB user id, a
-- BLOB device id, a TEXT logical id), which a page reports as unreadable:
-- so that it can be abandoned too. Each list is a handful of lookups in
-- the unique index, never a scan. The last line holds the user id to the
-- bytes asked for, whatever collation the column declares: a writer of
-- the file who re-declares it NOCASE must not make an ACK or an abandon
-- for "bob" delete the message pending for "Bob".
-- The row is judged by the row itself (queries/README.md, "A row is
-- judged by the row itself"): the index only proposes candidates, whose
-- recipient and id SQLite would take from the index entry; the EXISTS
-- reads the same three columns from the table row at the candidate's
-- sequence (NOT INDEXED: the rowid lookup, never an index), so a forged
-- index mapping carol's id to Bob's rows deletes nothing.
DELETE FROM pending_outbound_message
WHERE pending_outbound_message.recipient_user_id IN (sqlc.arg(recipient_user_id), CAST(sqlc.arg(recipient_user_id) AS BLOB))
  AND pending_outbound_message.recipient_device_id IN (sqlc.arg(recipient_device_id), CAST(CAST(sqlc.arg(recipient_device_id) AS TEXT) AS BLOB))
  AND pending_outbound_message.logical_id IN (sqlc.arg(logical_id), CAST(sqlc.arg(logical_id) AS TEXT))
  AND CAST(pending_outbound_message.recipient_user_id AS BLOB) = CAST(sqlc.arg(recipient_user_id) AS BLOB)
  AND EXISTS (
    SELECT 1 FROM pending_outbound_message AS own NOT INDEXED
    WHERE own.sequence = pending_outbound_message.sequence
      AND CAST(own.recipient_user_id AS BLOB) = CAST(sqlc.arg(recipient_user_id) AS BLOB)
      AND own.recipient_device_id IN (sqlc.arg(recipient_device_id), CAST(CAST(sqlc.arg(recipient_device_id) AS TEXT) AS BLOB))
      AND own.logical_id IN (sqlc.arg(logical_id), CAST(sqlc.arg(logical_id) AS TEXT)));

-- name: DeletePendingOutboundSequence :execrows
-- Abandons the row at one sequence, whatever its columns hold: for an
-- unreadable row whose recipient or logical id does not decode.
DELETE FROM pending_outbound_message WHERE sequence = sqlc.arg(sequence);

-- name: PendingOutboundSequenceHighWater :one
-- The AUTOINCREMENT high-water mark: the largest sequence ever handed out.
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS high_water
FROM sqlite_sequence
WHERE name = 'pending_outbound_message';

-- name: RaisePendingOutboundSequence :execrows
-- Open repairs a high-water mark below the highest stored sequence (lowered
-- by a writer other than the store): raised to it, so that once the highest
-- rows are deleted the next insert does not hand out their sequences again.
-- The mark is compared as the integer SQLite takes it for (sqlite_sequence
-- declares no type, so a writer can store TEXT or a BLOB there, which sorts
-- above every number but counts as the number it spells).
UPDATE sqlite_sequence
SET seq = (SELECT max(sequence) FROM pending_outbound_message)
WHERE name = 'pending_outbound_message'
  AND CAST(seq AS INTEGER) < (SELECT max(sequence) FROM pending_outbound_message);

-- name: RestorePendingOutboundSequence :execrows
-- The same repair for a high-water mark whose row was deleted: recorded
-- again as the highest stored sequence (if any row is stored).
-- max(sequence) is a scalar subquery, the rowid's last entry: in a FROM
-- clause SQLite flattens it and scans an index of the whole table.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'pending_outbound_message', (SELECT max(sequence) FROM pending_outbound_message)
WHERE (SELECT max(sequence) FROM pending_outbound_message) IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'pending_outbound_message');

-- name: SealedPendingOutboundBatch :many
-- Key rotation walks the table in sequence order, in batches, from
-- from_sequence on (the smallest integer at first, so that a row a damaged
-- database holds at or below sequence 0 is re-sealed too). The columns are
-- wrapped in likely, as in PagePendingOutbound, so that a row of another
-- storage class is reported and left alone instead of failing the batch.
SELECT sequence,
       likely(recipient_user_id) AS recipient_user_id,
       likely(recipient_device_id) AS recipient_device_id,
       likely(logical_id) AS logical_id,
       likely(CASE WHEN octet_length(sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN sealed END) AS sealed,
       octet_length(sealed) AS sealed_size
FROM pending_outbound_message
WHERE sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: UpdatePendingOutboundSealed :exec
UPDATE pending_outbound_message SET sealed = sqlc.arg(sealed) WHERE sequence = sqlc.arg(sequence);

-- name: LowerPendingOutboundSequence :execrows
-- Open with WithSequenceRestart: a high-water mark at the largest int64
-- (put there by a writer other than the store) is set to the highest
-- stored sequence, 0 if none is stored.
UPDATE sqlite_sequence
SET seq = coalesce((SELECT max(sequence) FROM pending_outbound_message), 0)
WHERE name = 'pending_outbound_message';

-- name: PendingOutboundByID :one
-- The pending message (recipient, logical id), found in the unique index:
-- a send keyed by the application's id compares it with what it is sent
-- again with. Columns as in the pages. The row is judged by the row
-- itself (queries/README.md): the EXISTS reads the three columns from the
-- table row at the candidate's sequence (NOT INDEXED: the rowid lookup),
-- so a forged index naming another row returns nothing.
SELECT pending_outbound_message.sequence,
       likely(pending_outbound_message.recipient_user_id) AS recipient_user_id,
       likely(pending_outbound_message.recipient_device_id) AS recipient_device_id,
       likely(pending_outbound_message.logical_id) AS logical_id,
       likely(CASE WHEN octet_length(pending_outbound_message.sealed) <= CAST(sqlc.arg(sealed_limit) AS INTEGER) THEN pending_outbound_message.sealed END) AS sealed,
       octet_length(pending_outbound_message.sealed) AS sealed_size
FROM pending_outbound_message
WHERE pending_outbound_message.recipient_user_id = sqlc.arg(recipient_user_id)
  AND pending_outbound_message.recipient_device_id = sqlc.arg(recipient_device_id)
  AND pending_outbound_message.logical_id = sqlc.arg(logical_id)
  AND EXISTS (
    SELECT 1 FROM pending_outbound_message AS own NOT INDEXED
    WHERE own.sequence = pending_outbound_message.sequence
      AND CAST(own.recipient_user_id AS BLOB) = CAST(sqlc.arg(recipient_user_id) AS BLOB)
      AND own.recipient_device_id = sqlc.arg(recipient_device_id)
      AND own.logical_id = sqlc.arg(logical_id))
LIMIT 1;
