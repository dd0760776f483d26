-- Step 1 of the legacy plaintext migration (package legacy): set the legacy
-- table aside under another name. Its version-15 index, if the database was
-- migrated to 15 before, is dropped here and recreated on the sealed table
-- by step 4 (a rebuild drops a table's indexes with it).
DROP INDEX IF EXISTS pending_outbound_message_recipient;
ALTER TABLE pending_outbound_message RENAME TO pending_outbound_message_plaintext;
