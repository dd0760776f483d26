-- The legacy (pre-sealing, plaintext) layout of pending_outbound_message,
-- declared for sqlc ONLY so that package legacy's queries compile. This is
-- NOT a migration and is never applied to a database.
--
-- A legacy database holds this table under the name pending_outbound_message
-- with a plaintext column where version 14 has sealed. Package legacy first
-- sets it aside under the name below, then rebuilds the sealed table from it
-- (see internal/legacy/sql/), so its queries read it under this name.
CREATE TABLE pending_outbound_message_plaintext (
  sequence            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  recipient_user_id   TEXT    NOT NULL,
  recipient_device_id INTEGER NOT NULL,
  logical_id          BLOB    NOT NULL,
  plaintext           BLOB    NOT NULL
);

-- SQLite's eponymous virtual table behind PRAGMA table_info, with the
-- columns the legacy queries read. arg (the table name) and schema are its
-- hidden columns: "WHERE arg = 'x'" is SQLite's spelling of the table-valued
-- call pragma_table_info('x') that sqlc can type-check.
CREATE TABLE pragma_table_info (
  cid        INTEGER NOT NULL,
  name       TEXT    NOT NULL,
  type       TEXT    NOT NULL,
  "notnull"  INTEGER NOT NULL,
  dflt_value TEXT,
  pk         INTEGER NOT NULL,
  arg        TEXT    NOT NULL,
  schema     TEXT
);
