-- Step 4, in the transaction that completes the sealing, only if the
-- set-aside legacy table has the version-15 index (the database was
-- migrated to 15 before): move the index to the sealed table, built once
-- over every row, exactly as
-- schema/migrations/15_pending_outbound_recipient_index.sql.
DROP INDEX pending_outbound_message_recipient;
CREATE INDEX pending_outbound_message_recipient
  ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence);
