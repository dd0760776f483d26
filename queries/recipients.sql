-- name: PendingOutboundRecipients :one
-- One keyset page of the recipients that have pending messages, ascending
-- by (user id, device id), after the cursor (after_user_id,
-- after_device_id): each with the sequence of its oldest pending message.
-- A loose index scan of pending_outbound_message_recipient: each step
-- seeks the first index entry past the recipient before, so a page costs
-- O(recipients returned * log n) however many messages each one has.
-- The next entry is the first of the same user with a greater device id
-- or, if there is none, the first of a greater user id: two seeks on
-- (user_id = ? AND device_id > ?) and (user_id > ?), each a true index
-- seek. (A row value (user_id, device_id) > (?, ?) against the recursive
-- table's columns is planned as that range, but runs as a seek on the
-- user id and a step over every entry of the recipient before: O(its
-- messages) per step.) SQLite has no LATERAL join to return the three
-- columns of the entry a seek found, so each seek returns them as one
-- text, the recursion's one column: the device id, the sequence and the
-- byte length of the user id, each as 20 (10) fixed-width digits, then
-- the user id's bytes; the next step takes the user id back from byte 51
-- on (through a BLOB, so that no byte of the user id ends it) and the
-- device id from the first 20. (Three scalar subqueries, one per column,
-- cost three times the seeks.) The page crosses the driver as one row:
-- the entries back to back, parsed by the store (recipients.go). The
-- entry found gives the recipient and its smallest sequence (the index
-- ends with sequence). A page from the start passes ('', the smallest
-- integer): below every address the schema admits (device ids are >= 0).
-- Only recipients stored as a TEXT user id and an INTEGER device id are
-- walked (a TEXT sorts below every BLOB, so the user id bound is part of
-- the index range): a row holding another storage class names no address
-- a retry could reach, and the pages report it as unreadable. The caller
-- passes row_limit = limit + 1: the extra recipient only says whether
-- another page follows.
WITH RECURSIVE recipient(entry, step) AS (
  SELECT printf('%020d%020d%010d', CAST(sqlc.arg(after_device_id) AS INTEGER), 0, 0) || CAST(sqlc.arg(after_user_id) AS TEXT) AS entry,
         0 AS step
  UNION ALL
  SELECT
    coalesce(
      (SELECT printf('%020d%020d%010d', p.recipient_device_id, p.sequence, octet_length(p.recipient_user_id)) || p.recipient_user_id
        FROM pending_outbound_message AS p
        WHERE p.recipient_user_id = CAST(substr(CAST(recipient.entry AS BLOB), 51) AS TEXT)
          AND p.recipient_device_id > CAST(substr(recipient.entry, 1, 20) AS INTEGER)
          AND typeof(p.recipient_device_id) = 'integer'
        ORDER BY p.recipient_device_id, p.sequence LIMIT 1),
      (SELECT printf('%020d%020d%010d', p.recipient_device_id, p.sequence, octet_length(p.recipient_user_id)) || p.recipient_user_id
        FROM pending_outbound_message AS p
        WHERE p.recipient_user_id > CAST(substr(CAST(recipient.entry AS BLOB), 51) AS TEXT) AND p.recipient_user_id < x''
          AND typeof(p.recipient_device_id) = 'integer'
        ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence LIMIT 1)) AS entry,
    recipient.step + 1 AS step
  FROM recipient
  WHERE recipient.entry IS NOT NULL AND recipient.step < CAST(sqlc.arg(row_limit) AS INTEGER)
)
SELECT CAST(coalesce(group_concat(entry, ''), '') AS TEXT) AS entries
FROM recipient
WHERE step > 0 AND entry IS NOT NULL;

-- name: PendingOutboundRecipientsScan :one
-- The same page read by stepping through pending_outbound_message_recipient
-- in order, as SELECT DISTINCT does: the store's first strategy
-- (store/sqlitestore/recipients.go), cheaper than a seek per recipient
-- wherever recipients hold a few messages each. Two ranges, each one
-- ordered index range (a row value (user_id, device_id) > (?, ?) would seek
-- on the user id and step over every entry of the cursor's recipient):
-- same_user, the cursor's user's greater device ids, and later_users, the
-- greater TEXT user ids, each grouped by recipient straight off the index
-- (the index order spares the sort: the group's smallest sequence is its
-- first entry), at most row_limit recipients. (A bound on the entries read,
-- a LIMIT in a subquery, runs the entries through a co-routine that costs a
-- third more per entry than DISTINCT's step.) Each range is read only if
-- its first recipient holds fewer than dense_entries entries: a probe
-- reads the range's first dense_entries entries (one seek, that many
-- steps) and finds them all one recipient's; a dense one leaves the range
-- '' (read, it is at least "|||"), and the store reads the page by
-- PendingOutboundRecipients instead. Each
-- range is packed into one text, so that a page crosses the driver as one
-- row, not one per recipient: "D1,D2,...|S1,S2,...|N1,N2,...|U1U2...", the
-- recipients' device ids, oldest sequences and the byte lengths of their
-- user ids, each a list of its own (a group_concat of a bare column costs a
-- fraction of one of a concat per recipient), then the user ids
-- themselves, back to back; "|||" for none. The same storage classes as
-- PendingOutboundRecipients are read.
SELECT
  CAST(CASE
    WHEN (SELECT count(*) = CAST(sqlc.arg(dense_entries) AS INTEGER) AND min(f.device_id) = max(f.device_id)
          FROM (SELECT p.recipient_device_id AS device_id FROM pending_outbound_message AS p
                WHERE p.recipient_user_id = CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_device_id > CAST(sqlc.arg(after_device_id) AS INTEGER)
                  AND typeof(p.recipient_device_id) = 'integer'
                ORDER BY p.recipient_device_id, p.sequence LIMIT CAST(sqlc.arg(dense_entries) AS INTEGER)) AS f)
    THEN ''
    ELSE (SELECT concat(group_concat(g.device_id), '|', group_concat(g.oldest), '|',
                        group_concat(octet_length(g.user_id)), '|', group_concat(g.user_id, ''))
      FROM (SELECT p.recipient_user_id AS user_id, p.recipient_device_id AS device_id, min(p.sequence) AS oldest
            FROM pending_outbound_message AS p
            WHERE p.recipient_user_id = CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_device_id > CAST(sqlc.arg(after_device_id) AS INTEGER)
              AND typeof(p.recipient_device_id) = 'integer'
            GROUP BY p.recipient_user_id, p.recipient_device_id
            ORDER BY p.recipient_user_id, p.recipient_device_id
            LIMIT CAST(sqlc.arg(row_limit) AS INTEGER)) AS g)
  END AS TEXT) AS same_user,
  CAST(CASE
    WHEN (SELECT count(*) = CAST(sqlc.arg(dense_entries) AS INTEGER) AND min(f.user_id) = max(f.user_id) AND min(f.device_id) = max(f.device_id)
          FROM (SELECT p.recipient_user_id AS user_id, p.recipient_device_id AS device_id FROM pending_outbound_message AS p
                WHERE p.recipient_user_id > CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_user_id < x''
                  AND typeof(p.recipient_device_id) = 'integer'
                ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence LIMIT CAST(sqlc.arg(dense_entries) AS INTEGER)) AS f)
    THEN ''
    ELSE (SELECT concat(group_concat(g.device_id), '|', group_concat(g.oldest), '|',
                        group_concat(octet_length(g.user_id)), '|', group_concat(g.user_id, ''))
      FROM (SELECT p.recipient_user_id AS user_id, p.recipient_device_id AS device_id, min(p.sequence) AS oldest
            FROM pending_outbound_message AS p
            WHERE p.recipient_user_id > CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_user_id < x''
              AND typeof(p.recipient_device_id) = 'integer'
            GROUP BY p.recipient_user_id, p.recipient_device_id
            ORDER BY p.recipient_user_id, p.recipient_device_id
            LIMIT CAST(sqlc.arg(row_limit) AS INTEGER)) AS g)
  END AS TEXT) AS later_users;
