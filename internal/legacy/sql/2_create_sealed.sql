-- Step 2: the sealed table, exactly as the version-14 DDL
-- (schema/migrations/14_baseline.sql; legacy_test checks it is the same
-- statement), AUTOINCREMENT included.
CREATE TABLE pending_outbound_message (
  sequence            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  recipient_user_id   TEXT    NOT NULL,
  recipient_device_id INTEGER NOT NULL CHECK (recipient_device_id >= 0),
  logical_id          BLOB    NOT NULL CHECK (length(logical_id) = 16),
  sealed              BLOB    NOT NULL,
  UNIQUE (recipient_user_id, recipient_device_id, logical_id)
);
