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
-- another page follows. Each step also counts the first dense_entries
-- entries of the recipient it stands on (a seek, that many steps): the
-- seeks pay where recipients are dense, and after sparse_run recipients
-- in a row holding fewer they stop, and the store hands the rest of the
-- page to the step (PendingOutboundRecipientsScan), cheaper there.
WITH RECURSIVE recipient(entry, step, sparse) AS (
  SELECT printf('%020d%020d%010d', CAST(sqlc.arg(after_device_id) AS INTEGER), 0, 0) || CAST(sqlc.arg(after_user_id) AS TEXT) AS entry,
         0 AS step, 0 AS sparse
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
    recipient.step + 1 AS step,
    CASE
      WHEN recipient.step = 0 THEN 0
      WHEN (SELECT count(*) FROM (SELECT 1 FROM pending_outbound_message AS p
              WHERE p.recipient_user_id = CAST(substr(CAST(recipient.entry AS BLOB), 51) AS TEXT)
                AND p.recipient_device_id = CAST(substr(recipient.entry, 1, 20) AS INTEGER)
              LIMIT CAST(sqlc.arg(dense_entries) AS INTEGER)) AS d) = CAST(sqlc.arg(dense_entries) AS INTEGER) THEN 0
      ELSE recipient.sparse + 1
    END AS sparse
  FROM recipient
  WHERE recipient.entry IS NOT NULL AND recipient.step < CAST(sqlc.arg(row_limit) AS INTEGER)
    AND recipient.sparse < CAST(sqlc.arg(sparse_run) AS INTEGER)
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
-- greater TEXT user ids. Each range is read only if its first recipient
-- holds fewer than dense_entries entries: a probe reads the range's first
-- dense_entries entries (one seek, that many steps) and finds them all one
-- recipient's; a dense one leaves the range '' and the store reads on by
-- PendingOutboundRecipients. Otherwise the range's first look_ahead
-- entries (its window, a LIMIT in a subquery) are grouped by recipient,
-- in index order (no sort: the group's smallest sequence is its first
-- entry), at most row_limit recipients. The window bounds what a
-- statement steps over: a recipient holding many met after the first is
-- read only as far as the window goes, and listed with its oldest
-- sequence; the store goes on after that recipient (its next statement
-- seeks past the rest) wherever a range listed fewer than row_limit
-- recipients and may not have ended: same_user's entries are counted per
-- recipient (they add up to look_ahead where the window was used up, and
-- the greater user ids are then not the page's), later_users' are not (a
-- count per entry costs the common page more than the next statement
-- costs the end of the list). Each range is packed into one text, so that
-- a page crosses the driver as one row, not one per recipient: a JSON
-- array (json_group_array, one accumulator: a list per column costs more)
-- of [user id, device id, oldest sequence], with the entries read fourth
-- in same_user; "[]" for none. The same storage classes as
-- PendingOutboundRecipients are read.
SELECT
  CAST(CASE
    WHEN (SELECT count(*) = CAST(sqlc.arg(dense_entries) AS INTEGER) AND min(f.device_id) = max(f.device_id)
          FROM (SELECT p.recipient_device_id AS device_id FROM pending_outbound_message AS p
                WHERE p.recipient_user_id = CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_device_id > CAST(sqlc.arg(after_device_id) AS INTEGER)
                  AND typeof(p.recipient_device_id) = 'integer'
                ORDER BY p.recipient_device_id, p.sequence LIMIT CAST(sqlc.arg(dense_entries) AS INTEGER)) AS f)
    THEN ''
    ELSE (SELECT json_group_array(json_array(g.user_id, g.device_id, g.oldest, g.entries))
      FROM (SELECT w.user_id, w.device_id, min(w.sequence) AS oldest, count(*) AS entries
            FROM (SELECT p.recipient_user_id AS user_id, p.recipient_device_id AS device_id, p.sequence
                  FROM pending_outbound_message AS p
                  WHERE p.recipient_user_id = CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_device_id > CAST(sqlc.arg(after_device_id) AS INTEGER)
                    AND typeof(p.recipient_device_id) = 'integer'
                  ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence
                  LIMIT CAST(sqlc.arg(look_ahead) AS INTEGER)) AS w
            GROUP BY w.user_id, w.device_id
            ORDER BY w.user_id, w.device_id
            LIMIT CAST(sqlc.arg(row_limit) AS INTEGER)) AS g)
  END AS TEXT) AS same_user,
  CAST(CASE
    WHEN (SELECT count(*) = CAST(sqlc.arg(dense_entries) AS INTEGER) AND min(f.user_id) = max(f.user_id) AND min(f.device_id) = max(f.device_id)
          FROM (SELECT p.recipient_user_id AS user_id, p.recipient_device_id AS device_id FROM pending_outbound_message AS p
                WHERE p.recipient_user_id > CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_user_id < x''
                  AND typeof(p.recipient_device_id) = 'integer'
                ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence LIMIT CAST(sqlc.arg(dense_entries) AS INTEGER)) AS f)
    THEN ''
    ELSE (SELECT json_group_array(json_array(g.user_id, g.device_id, g.oldest))
      FROM (SELECT w.user_id, w.device_id, min(w.sequence) AS oldest
            FROM (SELECT p.recipient_user_id AS user_id, p.recipient_device_id AS device_id, p.sequence
                  FROM pending_outbound_message AS p
                  WHERE p.recipient_user_id > CAST(sqlc.arg(after_user_id) AS TEXT) AND p.recipient_user_id < x''
                    AND typeof(p.recipient_device_id) = 'integer'
                  ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence
                  LIMIT CAST(sqlc.arg(look_ahead) AS INTEGER)) AS w
            GROUP BY w.user_id, w.device_id
            ORDER BY w.user_id, w.device_id
            LIMIT CAST(sqlc.arg(row_limit) AS INTEGER)) AS g)
  END AS TEXT) AS later_users;
