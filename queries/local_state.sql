-- name: GetLocalIdentity :one
-- The columns with their storage class (likely, as in the pending pages):
-- a row of another class than the schema declares (a device id rewritten
-- as TEXT, which the column's CHECK lets through) is reported as corrupt
-- instead of failing the scan.
SELECT likely(user_id) AS user_id, likely(device_id) AS device_id, likely(sealed) AS sealed
FROM local_identity
WHERE id = 1;

-- name: InsertLocalIdentity :exec
INSERT INTO local_identity (id, user_id, device_id, sealed) VALUES (1, ?, ?, ?);

-- name: UpdateLocalIdentitySealed :exec
UPDATE local_identity SET sealed = ? WHERE id = 1;

-- name: GetIdentityPin :one
SELECT sealed FROM identity_pin WHERE user_id = ? AND device_id = ?;

-- name: UpsertIdentityPin :execrows
-- A row is judged by the row itself: the conflict is found through the
-- primary key's index, and the update applies only if the conflicting
-- table row is this device's (its own columns, read from the table);
-- 0 rows affected means the index named another row (ErrCorruptIndex).
INSERT INTO identity_pin (user_id, device_id, sealed) VALUES (?, ?, ?)
ON CONFLICT (user_id, device_id) DO UPDATE SET sealed = excluded.sealed
WHERE identity_pin.user_id = excluded.user_id AND identity_pin.device_id = excluded.device_id;

-- name: DeleteIdentityPin :exec
-- For a pin that does not open (DiscardUnreadablePeer), and for a first
-- contact the application declines (ForgetPeer).
DELETE FROM identity_pin
WHERE identity_pin.user_id = sqlc.arg(user_id) AND identity_pin.device_id = sqlc.arg(device_id)
  AND EXISTS (SELECT 1 FROM identity_pin AS own NOT INDEXED
              WHERE own.rowid = identity_pin.rowid AND own.user_id = sqlc.arg(user_id) AND own.device_id = sqlc.arg(device_id));

-- name: GetSession :one
SELECT sealed FROM session WHERE user_id = ? AND device_id = ?;

-- name: UpsertSession :execrows
-- As UpsertIdentityPin: 0 rows affected, the index named another row.
INSERT INTO session (user_id, device_id, sealed) VALUES (?, ?, ?)
ON CONFLICT (user_id, device_id) DO UPDATE SET sealed = excluded.sealed
WHERE session.user_id = excluded.user_id AND session.device_id = excluded.device_id;

-- name: DeleteSession :exec
DELETE FROM session
WHERE session.user_id = sqlc.arg(user_id) AND session.device_id = sqlc.arg(device_id)
  AND EXISTS (SELECT 1 FROM session AS own NOT INDEXED
              WHERE own.rowid = session.rowid AND own.user_id = sqlc.arg(user_id) AND own.device_id = sqlc.arg(device_id));

-- name: GetSessionInitiation :one
SELECT sealed FROM session_initiation WHERE user_id = ? AND device_id = ?;

-- name: UpsertSessionInitiation :execrows
-- As UpsertIdentityPin: 0 rows affected, the index named another row.
INSERT INTO session_initiation (user_id, device_id, sealed) VALUES (?, ?, ?)
ON CONFLICT (user_id, device_id) DO UPDATE SET sealed = excluded.sealed
WHERE session_initiation.user_id = excluded.user_id AND session_initiation.device_id = excluded.device_id;

-- name: DeleteSessionInitiation :exec
DELETE FROM session_initiation
WHERE session_initiation.user_id = sqlc.arg(user_id) AND session_initiation.device_id = sqlc.arg(device_id)
  AND EXISTS (SELECT 1 FROM session_initiation AS own NOT INDEXED
              WHERE own.rowid = session_initiation.rowid AND own.user_id = sqlc.arg(user_id) AND own.device_id = sqlc.arg(device_id));

-- name: InsertProcessedInbound :execrows
-- 0 rows affected means the message was processed before: a duplicate, once
-- ProcessedInboundHeld confirms it from the table row.
INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at)
VALUES (?, ?, ?, ?)
ON CONFLICT DO NOTHING;

-- name: DeleteProcessedInboundFrom :execrows
-- Every processed id of one sender device (ForgetPeer), found through the
-- primary key's index and judged by the row itself.
DELETE FROM processed_inbound_message
WHERE processed_inbound_message.sender_user_id = sqlc.arg(sender_user_id)
  AND processed_inbound_message.sender_device_id = sqlc.arg(sender_device_id)
  AND EXISTS (SELECT 1 FROM processed_inbound_message AS own NOT INDEXED
              WHERE own.rowid = processed_inbound_message.rowid
                AND own.sender_user_id = sqlc.arg(sender_user_id)
                AND own.sender_device_id = sqlc.arg(sender_device_id));

-- name: ProcessedInboundHeld :one
-- 1 if the table holds a row of this sender, device and logical id, found
-- through the primary key's index and judged by the row itself (its own
-- columns at the rowid the index gave, NOT INDEXED): a conflict the index
-- reported for a row that is not this id is a forged index, not a
-- duplicate.
SELECT CAST(EXISTS (
  SELECT 1 FROM processed_inbound_message
  WHERE processed_inbound_message.sender_user_id = sqlc.arg(sender_user_id)
    AND processed_inbound_message.sender_device_id = sqlc.arg(sender_device_id)
    AND processed_inbound_message.logical_id = sqlc.arg(logical_id)
    AND EXISTS (SELECT 1 FROM processed_inbound_message AS own NOT INDEXED
                WHERE own.rowid = processed_inbound_message.rowid
                  AND own.sender_user_id = sqlc.arg(sender_user_id)
                  AND own.sender_device_id = sqlc.arg(sender_device_id)
                  AND own.logical_id = sqlc.arg(logical_id))) AS INTEGER) AS held;

-- name: ListStorageKeys :many
-- created_at is not read: nothing uses it, and a value of another class
-- (a TEXT date, which the column lets through) would fail the scan and
-- with it every Open.
SELECT key_id, state, verifier FROM storage_key ORDER BY key_id;

-- name: AnySealedValue :one
-- 1 if any table with a sealed column holds a row (every sealed column is
-- NOT NULL, so a row is a sealed value; the pending outbound queue counts
-- in either layout, sealed or legacy plaintext), 0 otherwise. Open adopts
-- a new storage key only when storage_key is empty and this is 0.
SELECT CAST(
     EXISTS (SELECT 1 FROM local_identity)
  OR EXISTS (SELECT 1 FROM identity_pin)
  OR EXISTS (SELECT 1 FROM session)
  OR EXISTS (SELECT 1 FROM session_initiation)
  OR EXISTS (SELECT 1 FROM pending_outbound_message)
  OR EXISTS (SELECT 1 FROM pending_inbound_message)
  AS INTEGER) AS any_sealed;

-- name: InsertStorageKey :exec
INSERT INTO storage_key (key_id, state, verifier, created_at) VALUES (?, ?, ?, ?);

-- name: SetStorageKeyState :exec
UPDATE storage_key SET state = ? WHERE key_id = ?;

-- name: DeleteStorageKey :exec
DELETE FROM storage_key WHERE key_id = ?;

-- name: SealedIdentityPinBatch :many
-- The pins, then (the next two) the sessions and initiations, in key
-- order, in batches, with their values as the schema declares them: what
-- the fixture tools list and check. Key rotation walks these tables with
-- the Rotation*Batch queries, which also return a row of another storage
-- class.
SELECT user_id, device_id, sealed FROM identity_pin
WHERE user_id > sqlc.arg(after_user_id)
   OR (user_id = sqlc.arg(after_user_id) AND device_id > sqlc.arg(after_device_id))
ORDER BY user_id, device_id
LIMIT sqlc.arg(row_limit);

-- name: SealedSessionBatch :many
SELECT user_id, device_id, sealed FROM session
WHERE user_id > sqlc.arg(after_user_id)
   OR (user_id = sqlc.arg(after_user_id) AND device_id > sqlc.arg(after_device_id))
ORDER BY user_id, device_id
LIMIT sqlc.arg(row_limit);

-- name: SealedSessionInitiationBatch :many
SELECT user_id, device_id, sealed FROM session_initiation
WHERE user_id > sqlc.arg(after_user_id)
   OR (user_id = sqlc.arg(after_user_id) AND device_id > sqlc.arg(after_device_id))
ORDER BY user_id, device_id
LIMIT sqlc.arg(row_limit);

-- name: SealedPendingInboundBatch :many
-- The pending inbound messages in sequence order, in batches, with their
-- values as the schema declares them: what the fixture tools read. Key
-- rotation walks the table with RotationPendingInboundBatch.
SELECT sequence, sender_user_id, sender_device_id, logical_id, sealed FROM pending_inbound_message
WHERE sequence >= sqlc.arg(from_sequence)
ORDER BY sequence
LIMIT sqlc.arg(row_limit);

-- name: UpdateIdentityPinSealed :exec
UPDATE identity_pin SET sealed = sqlc.arg(sealed)
WHERE identity_pin.user_id = sqlc.arg(user_id) AND identity_pin.device_id = sqlc.arg(device_id)
  AND EXISTS (SELECT 1 FROM identity_pin AS own NOT INDEXED
              WHERE own.rowid = identity_pin.rowid AND own.user_id = sqlc.arg(user_id) AND own.device_id = sqlc.arg(device_id));

-- name: UpdateSessionSealed :exec
UPDATE session SET sealed = sqlc.arg(sealed)
WHERE session.user_id = sqlc.arg(user_id) AND session.device_id = sqlc.arg(device_id)
  AND EXISTS (SELECT 1 FROM session AS own NOT INDEXED
              WHERE own.rowid = session.rowid AND own.user_id = sqlc.arg(user_id) AND own.device_id = sqlc.arg(device_id));

-- name: UpdateSessionInitiationSealed :exec
UPDATE session_initiation SET sealed = sqlc.arg(sealed)
WHERE session_initiation.user_id = sqlc.arg(user_id) AND session_initiation.device_id = sqlc.arg(device_id)
  AND EXISTS (SELECT 1 FROM session_initiation AS own NOT INDEXED
              WHERE own.rowid = session_initiation.rowid AND own.user_id = sqlc.arg(user_id) AND own.device_id = sqlc.arg(device_id));

-- name: UpdatePendingInboundSealed :exec
UPDATE pending_inbound_message SET sealed = ? WHERE sequence = ?;

-- name: UpdateStorageKeyVerifier :exec
UPDATE storage_key SET verifier = ? WHERE key_id = ?;

-- name: RotationLocalIdentity :many
-- Key rotation's read of the local_identity row, its columns with their
-- storage class (likely, as RotationIdentityPinBatch): a row of another
-- class than the schema declares is reported and left alone, like a
-- corrupt row of any other sealed table, instead of failing the rotation.
SELECT likely(user_id) AS user_id, likely(device_id) AS device_id, likely(sealed) AS sealed
FROM local_identity
WHERE id = 1;

-- name: RotationIdentityPinBatch :many
-- Key rotation's walk of identity_pin, in key order, in batches. Columns
-- and cursor are wrapped in likely (a no-op the code generator removes) so
-- that sqlc types them as interfaces: a row whose values have another
-- storage class than the schema declares (a BLOB user id, a REAL device
-- id) comes back with its class, to be reported and left alone, and the
-- cursor resumes after it in SQLite's own order instead of failing the
-- batch or walking in circles.
SELECT likely(user_id) AS user_id, likely(device_id) AS device_id, likely(sealed) AS sealed
FROM identity_pin
WHERE user_id > likely(sqlc.arg(after_user_id))
   OR (user_id = likely(sqlc.arg(after_user_id)) AND device_id > likely(sqlc.arg(after_device_id)))
ORDER BY user_id, device_id
LIMIT sqlc.arg(row_limit);

-- name: RotationSessionBatch :many
-- As RotationIdentityPinBatch, for session.
SELECT likely(user_id) AS user_id, likely(device_id) AS device_id, likely(sealed) AS sealed
FROM session
WHERE user_id > likely(sqlc.arg(after_user_id))
   OR (user_id = likely(sqlc.arg(after_user_id)) AND device_id > likely(sqlc.arg(after_device_id)))
ORDER BY user_id, device_id
LIMIT sqlc.arg(row_limit);

-- name: RotationSessionInitiationBatch :many
-- As RotationIdentityPinBatch, for session_initiation.
SELECT likely(user_id) AS user_id, likely(device_id) AS device_id, likely(sealed) AS sealed
FROM session_initiation
WHERE user_id > likely(sqlc.arg(after_user_id))
   OR (user_id = likely(sqlc.arg(after_user_id)) AND device_id > likely(sqlc.arg(after_device_id)))
ORDER BY user_id, device_id
LIMIT sqlc.arg(row_limit);

-- name: RotationPendingInboundBatch :many
-- Key rotation's walk of pending_inbound_message, as
-- SealedPendingOutboundBatch: columns with their storage class, the sealed
-- value measured before it is read.
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

-- name: ForeignKeysEnforced :one
-- PRAGMA foreign_keys of this connection, read as its table-valued
-- function: 1 when foreign keys are enforced.
SELECT foreign_keys FROM pragma_foreign_keys;
