-- The migration history: one row per applied schema version, written by
-- package migration in the format of Atlas's executor. It is not part of
-- the versioned schema, so it is created before the first migration runs.
CREATE TABLE IF NOT EXISTS schema_revision (
  version          TEXT    NOT NULL PRIMARY KEY,
  description      TEXT    NOT NULL,
  type             INTEGER NOT NULL,
  applied          INTEGER NOT NULL,
  total            INTEGER NOT NULL,
  executed_at      INTEGER NOT NULL,
  execution_time   INTEGER NOT NULL,
  error            TEXT    NOT NULL DEFAULT '',
  error_stmt       TEXT    NOT NULL DEFAULT '',
  hash             TEXT    NOT NULL,
  partial_hashes   TEXT    NOT NULL DEFAULT '',
  operator_version TEXT    NOT NULL
);
