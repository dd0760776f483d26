-- Step 4, only if the legacy table had it (the database was migrated to
-- version 15 before): recreate the version-15 index, exactly as
-- schema/migrations/15_pending_outbound_recipient_index.sql.
CREATE INDEX pending_outbound_message_recipient
  ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence);
