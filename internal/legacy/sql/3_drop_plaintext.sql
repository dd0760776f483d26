-- Step 3, after every row was copied sealed and the sqlite_sequence
-- high-water mark restored: drop the legacy table and its plaintext.
DROP TABLE pending_outbound_message_plaintext;
