-- Step 1 of the legacy plaintext migration (package legacy): set the legacy
-- table aside under another name. Its version-15 index, if the database was
-- migrated to 15 before, goes with it (an index keeps its name when its
-- table is renamed): it marks, durably, that step 4 must recreate the
-- index on the sealed table once every row is sealed.
ALTER TABLE pending_outbound_message RENAME TO pending_outbound_message_plaintext;
