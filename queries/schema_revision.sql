-- name: ListRevisions :many
SELECT * FROM schema_revision ORDER BY version;

-- name: GetRevision :one
SELECT * FROM schema_revision WHERE version = ?;

-- name: UpsertRevision :exec
INSERT INTO schema_revision (
  version, description, type, applied, total, executed_at, execution_time,
  error, error_stmt, hash, partial_hashes, operator_version
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (version) DO UPDATE SET
  description = excluded.description,
  type = excluded.type,
  applied = excluded.applied,
  total = excluded.total,
  executed_at = excluded.executed_at,
  execution_time = excluded.execution_time,
  error = excluded.error,
  error_stmt = excluded.error_stmt,
  hash = excluded.hash,
  partial_hashes = excluded.partial_hashes,
  operator_version = excluded.operator_version;

-- name: DeleteRevision :exec
DELETE FROM schema_revision WHERE version = ?;

-- name: RevisionTableExists :one
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_revision';

-- name: UserTableCount :one
-- Tables other than SQLite's own and the history: zero means a fresh file.
SELECT count(*) FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'schema_revision';

-- name: ListViewsAndTriggers :many
-- Views and triggers, which Atlas's open-source SQLite inspection does not
-- see: drift compares them with head's by their SQL text.
SELECT type, name, tbl_name, coalesce(sql, '') AS sql FROM sqlite_master
WHERE type IN ('view', 'trigger')
ORDER BY type, name;

-- name: ListSchemaObjects :many
-- Every schema object, SQLite's own included: Open and migrate compare
-- them with what the migrations define.
SELECT type, name, tbl_name FROM sqlite_master
ORDER BY type, name;

-- name: UserVersion :one
-- PRAGMA user_version, read as its table-valued function: the schema
-- version every migration records in the file's header.
SELECT user_version FROM pragma_user_version;

-- name: TableCount :one
-- How many tables are named name, compared as SQLite compares names
-- (ASCII case-insensitively): 0 or 1.
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND lower(name) = lower(sqlc.arg(name));

-- name: TextEncoding :one
-- PRAGMA encoding, read as its table-valued function: the text encoding
-- of the database ("UTF-8", "UTF-16le" or "UTF-16be").
SELECT encoding FROM pragma_encoding;
