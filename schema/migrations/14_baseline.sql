-- Version 14: the client's whole local state, as it stood before
-- milestone 22. Every column named "sealed" holds a sealed record
-- (package seal) whose associated data binds the row's identity.

-- The storage keys that sealed this database. key_id is the id written in
-- every sealed record; verifier is a sealed known value proving a key is
-- the right one before anything is opened with it.
CREATE TABLE storage_key (
  key_id     INTEGER NOT NULL PRIMARY KEY,
  state      TEXT    NOT NULL CHECK (state IN ('active', 'retiring')),
  verifier   BLOB    NOT NULL,
  created_at INTEGER NOT NULL
);

-- This device's identity and prekeys (record type 1). One row.
CREATE TABLE local_identity (
  id        INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  user_id   TEXT    NOT NULL,
  device_id INTEGER NOT NULL CHECK (device_id >= 0),
  sealed    BLOB    NOT NULL
);

-- Trust-on-first-use pins of remote identities (record type 2).
CREATE TABLE identity_pin (
  user_id   TEXT    NOT NULL,
  device_id INTEGER NOT NULL CHECK (device_id >= 0),
  sealed    BLOB    NOT NULL,
  PRIMARY KEY (user_id, device_id)
);

-- Established ratchet sessions, one per remote device (record type 3).
CREATE TABLE session (
  user_id   TEXT    NOT NULL,
  device_id INTEGER NOT NULL CHECK (device_id >= 0),
  sealed    BLOB    NOT NULL,
  PRIMARY KEY (user_id, device_id)
);

-- Outgoing initiations not yet answered by the remote device (record type 4).
CREATE TABLE session_initiation (
  user_id   TEXT    NOT NULL,
  device_id INTEGER NOT NULL CHECK (device_id >= 0),
  sealed    BLOB    NOT NULL,
  PRIMARY KEY (user_id, device_id)
);

-- Messages sent and not yet acknowledged by their recipient (record type 5).
-- sequence is the global pagination cursor: AUTOINCREMENT keeps it from
-- ever being reused, also after the highest row is deleted.
CREATE TABLE pending_outbound_message (
  sequence            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  recipient_user_id   TEXT    NOT NULL,
  recipient_device_id INTEGER NOT NULL CHECK (recipient_device_id >= 0),
  logical_id          BLOB    NOT NULL CHECK (length(logical_id) = 16),
  sealed              BLOB    NOT NULL,
  UNIQUE (recipient_user_id, recipient_device_id, logical_id)
);

-- Messages received and decrypted but not yet finalized by the
-- application (record type 6).
CREATE TABLE pending_inbound_message (
  sequence         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  sender_user_id   TEXT    NOT NULL,
  sender_device_id INTEGER NOT NULL CHECK (sender_device_id >= 0),
  logical_id       BLOB    NOT NULL CHECK (length(logical_id) = 16),
  sealed           BLOB    NOT NULL,
  UNIQUE (sender_user_id, sender_device_id, logical_id)
);

-- Logical ids of messages already processed, to drop duplicates. Holds no
-- content, so nothing here is sealed.
CREATE TABLE processed_inbound_message (
  sender_user_id   TEXT    NOT NULL,
  sender_device_id INTEGER NOT NULL CHECK (sender_device_id >= 0),
  logical_id       BLOB    NOT NULL CHECK (length(logical_id) = 16),
  processed_at     INTEGER NOT NULL,
  PRIMARY KEY (sender_user_id, sender_device_id, logical_id)
);
