-- name: PendingOutboundRecipients :many
-- One keyset page of the recipients that have pending messages, ascending
-- by (user id, device id), after the cursor (after_user_id,
-- after_device_id): each with the sequence of its oldest pending message.
-- A loose index scan of pending_outbound_message_recipient: each step
-- seeks the first index entry past the recipient before, so a page costs
-- O(recipients returned * log n) however many messages each one has (a
-- SELECT DISTINCT walks every entry). The three scalar subqueries of a step
-- are the same seek (one entry: its user id, device id and sequence, the
-- recipient's smallest since the index ends with sequence); SQLite has no
-- LATERAL join to return the three columns of one subquery, and the second
-- and third descents read the pages the first has just read. The unary +
-- strips the CTE column's INTEGER affinity (from its subquery): with it,
-- SQLite would compare device ids under NUMERIC affinity, which is not the
-- index's, and seek on the user id alone, stepping over every entry of the
-- user before. A page from
-- the start passes ('', the smallest integer): below every address the
-- schema admits (device ids are >= 0). Only recipients stored as a TEXT
-- user id and an INTEGER device id are walked (a TEXT sorts below every
-- BLOB, so the user id bound is part of the index range): a row holding
-- another storage class names no address a retry could reach, and the
-- pages report it as unreadable. The caller passes row_limit = limit + 1:
-- the extra recipient only says whether another page follows.
WITH RECURSIVE recipient(user_id, device_id, oldest, step) AS (
  SELECT CAST(sqlc.arg(after_user_id) AS TEXT) AS user_id, CAST(sqlc.arg(after_device_id) AS INTEGER) AS device_id, NULL AS oldest, 0 AS step
  UNION ALL
  SELECT
    (SELECT p.recipient_user_id FROM pending_outbound_message AS p
     WHERE (p.recipient_user_id, p.recipient_device_id) > (recipient.user_id, +recipient.device_id)
       AND p.recipient_user_id < x'' AND typeof(p.recipient_device_id) = 'integer'
     ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence LIMIT 1) AS user_id,
    (SELECT p.recipient_device_id FROM pending_outbound_message AS p
     WHERE (p.recipient_user_id, p.recipient_device_id) > (recipient.user_id, +recipient.device_id)
       AND p.recipient_user_id < x'' AND typeof(p.recipient_device_id) = 'integer'
     ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence LIMIT 1) AS device_id,
    (SELECT p.sequence FROM pending_outbound_message AS p
     WHERE (p.recipient_user_id, p.recipient_device_id) > (recipient.user_id, +recipient.device_id)
       AND p.recipient_user_id < x'' AND typeof(p.recipient_device_id) = 'integer'
     ORDER BY p.recipient_user_id, p.recipient_device_id, p.sequence LIMIT 1) AS oldest,
    recipient.step + 1 AS step
  FROM recipient
  WHERE recipient.user_id IS NOT NULL AND recipient.step < CAST(sqlc.arg(row_limit) AS INTEGER)
)
SELECT CAST(user_id AS TEXT) AS recipient_user_id,
       CAST(device_id AS INTEGER) AS recipient_device_id,
       CAST(oldest AS INTEGER) AS oldest_sequence
FROM recipient
WHERE step > 0 AND user_id IS NOT NULL;
